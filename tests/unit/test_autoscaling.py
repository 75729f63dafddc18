"""The autoscaler: HPA's documented examples, its conservative rule for replicas without a
reading, the stabilization windows, and its bounds as properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from federation.autoscaling import Reading, Recommendations, recommend
from federation.compiled import CompiledAutoscaling

RULE = CompiledAutoscaling(metric="m", target=100.0, port=9090, up_window_s=0, down_window_s=300)
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True)


def _at(replicas: int, average: float, sampled: int | None = None) -> Reading:
    read = replicas if sampled is None else sampled
    return Reading(ready=replicas, sampled=read, metric_sum=average * read)


def test_hpa_examples_double_at_twice_the_target_and_halve_at_half() -> None:
    # kubernetes.io HPA: "if the current metric value is 200m and the desired value is 100m,
    # the number of replicas will be doubled ... 50m: you'll halve the number of replicas"
    assert recommend(4, _at(4, 200.0), RULE).replicas == 8
    assert recommend(4, _at(4, 50.0), RULE).replicas == 2
    # desiredReplicas = ceil[currentReplicas * (currentMetricValue / desiredMetricValue)]
    assert recommend(3, _at(3, 150.0), RULE).replicas == 5  # ceil(4.5)


def test_within_the_tolerance_nothing_changes() -> None:
    assert recommend(4, _at(4, 109.0), RULE).replicas == 4
    assert recommend(4, _at(4, 91.0), RULE).replicas == 4
    assert recommend(4, _at(4, 111.0), RULE).replicas == 5


def test_replicas_without_a_reading_are_counted_conservatively() -> None:
    # scaling up: the unread replicas count as 0 (4 read at 200, 4 at 0: average 100: keep)
    assert recommend(8, _at(8, 200.0, sampled=4), RULE).replicas == 8
    assert recommend(4, _at(4, 400.0, sampled=2), RULE).replicas == 8  # (800 + 0) / 400
    # scaling down: they count as the target (2 read at 0, 2 at 100: ratio 0.5 -> 2)
    assert recommend(4, _at(4, 0.0, sampled=2), RULE).replicas == 2
    # no reading at all: no change
    assert recommend(5, Reading(ready=5, sampled=0, metric_sum=0.0), RULE).replicas == 5


def test_a_scale_up_takes_the_least_of_its_window_and_a_scale_down_waits_for_its_own() -> None:
    rule = CompiledAutoscaling(metric="m", target=1.0, port=1, up_window_s=10, down_window_s=60)
    history = Recommendations(since=-100.0)
    history.stabilized(0.0, 4, 2, rule, (1, 10))
    assert history.stabilized(5.0, 8, 2, rule, (1, 10)) == 4  # least of the last 10 s
    assert history.stabilized(11.0, 8, 4, rule, (1, 10)) == 8
    assert history.stabilized(12.0, 2, 8, rule, (1, 10)) == 8  # 8 still in the down-window
    assert history.stabilized(71.0, 2, 8, rule, (1, 10)) == 8  # 8 at 11 s: in the window
    assert history.stabilized(72.0, 2, 8, rule, (1, 10)) == 2  # a whole window lower
    assert history.stabilized(83.0, 20, 2, rule, (1, 10)) == 10  # clamped to max


def test_a_new_history_scales_down_only_after_a_whole_window() -> None:
    history = Recommendations(since=0.0)
    assert history.stabilized(1.0, 1, 4, RULE, (1, 10)) == 4
    assert history.stabilized(299.0, 1, 4, RULE, (1, 10)) == 4
    assert history.stabilized(300.0, 1, 4, RULE, (1, 10)) == 1


readings = st.builds(
    lambda ready, sampled, average: Reading(ready, min(sampled, ready), average * sampled),
    st.integers(0, 50),
    st.integers(0, 50),
    st.floats(0, 1000, allow_nan=False),
)
rules = st.builds(
    lambda target, tolerance, up, down: CompiledAutoscaling(
        metric="m", target=target, port=1, tolerance=tolerance, up_window_s=up, down_window_s=down
    ),
    st.floats(0.5, 500, allow_nan=False),
    st.floats(0, 0.5),
    st.integers(0, 30),
    st.integers(0, 300),
)


@SETTINGS
@given(rules, st.integers(1, 20), st.lists(st.tuples(st.integers(0, 40), readings), max_size=20))
def test_desired_stays_within_bounds_and_a_scale_down_waits_for_a_lower_window(
    rule: CompiledAutoscaling, low: int, steps: list[tuple[int, Reading]]
) -> None:
    high = low + 10
    history = Recommendations(since=0.0)
    current, now = low, 0.0
    raw: list[tuple[float, int]] = []
    for gap, reading in steps:
        now += gap
        rec = recommend(current, reading, rule)
        raw.append((now, rec.replicas))
        if reading.sampled and abs(reading.metric_sum / reading.sampled / rule.target - 1) < (
            rule.tolerance * 0.99
        ):
            assert rec.replicas == current  # within tolerance: nothing changes
        desired = history.stabilized(now, rec.replicas, current, rule, (low, high))
        assert low <= desired <= high
        if desired < current and current <= high:
            assert now >= rule.down_window_s  # the window was seen whole
            window = [r for t, r in raw if t >= now - rule.down_window_s]
            assert all(r < current for r in window)
        current = desired
