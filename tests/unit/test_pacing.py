"""The loop's window of a long queue is sized so that cycles take about the target time."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from federation.controllers.pacing import LARGEST, SMALLEST, Pace, Window


def test_a_window_is_half_head_half_rotating() -> None:
    assert Window.of(5) == Window(2, 3)
    assert Window.of(1000) == Window(500, 500)


def test_a_slow_machine_gets_smaller_cycles_that_settle_at_the_target() -> None:
    """A cycle costs 50 ms plus 0.5 ms per job considered (the machine's share of a core):
    the window settles where a cycle takes the target, not 5,000 jobs' 2.55 s."""
    pace = Pace(1.0)
    for _ in range(30):
        n = pace.size
        pace.observe(n, 0.05 + 0.0005 * n)
    assert abs((0.05 + 0.0005 * pace.size) - 1.0) < 0.01
    assert pace.window.head + pace.window.rotating == pace.size


def test_a_fast_loop_considers_the_largest_window_and_a_slow_one_still_progresses() -> None:
    fast, slow = Pace(1.0), Pace(1.0)
    for _ in range(20):
        fast.observe(fast.size, 0.0001 * fast.size)
        slow.observe(slow.size, 5.0)  # more than the target whatever the size
    assert fast.size == LARGEST
    assert slow.size == SMALLEST


def test_one_slow_cycle_halves_the_window_at_most_and_an_empty_one_says_nothing() -> None:
    pace = Pace(1.0, first=4000)
    pace.observe(4000, 100.0)
    assert pace.size == 2000
    pace.observe(0, 0.001)
    assert pace.size == 2000


@given(
    st.lists(st.tuples(st.integers(0, 20_000), st.floats(0, 100, allow_nan=False)), max_size=30),
    st.integers(1, 10_000),
)
def test_the_window_stays_within_its_bounds(cycles: list[tuple[int, float]], first: int) -> None:
    pace = Pace(0.5, first=first)
    for considered, seconds in cycles:
        before = pace.size
        pace.observe(considered, seconds)
        assert SMALLEST <= pace.size <= LARGEST
        assert pace.size <= max(2 * before, SMALLEST) and pace.size >= min(before // 2, LARGEST)


def test_bounds_that_cannot_hold_are_refused() -> None:
    with pytest.raises(ValueError, match="smallest"):
        Pace(1.0, smallest=10, largest=5)
