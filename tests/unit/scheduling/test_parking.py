"""Parked jobs: skipping what the last cycle found no room for changes no decision, and a job
is tried again as soon as something it could use appears."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from federation.scheduling.cycle import schedule
from federation.scheduling.decisions import CycleResult
from federation.scheduling.framework import SchedulerConfig
from federation.scheduling.model import Job, Node, Snapshot
from federation.scheduling.state import State

from .builders import ASCEND, H100, advance, cluster, job, node, pool, queue, snapshot, without
from .test_invariants import job_lists, scenarios

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)


def decisions(result: CycleResult) -> Hashable:
    """Everything a cycle decided, apart from the words of its pending reasons."""
    return (
        tuple(p.placement for p in result.placed),
        tuple(
            (p.preemptor.id, tuple(v.job.id for v in p.victims), p.reservation, p.shrunk)
            for p in result.preempted
        ),
        tuple(sorted(p.job.id for p in result.pending)),
        tuple(r.job.id for r in result.rejected),
        tuple((r.job.id, r.placement, r.start) for r in result.reserved),
        result.grown,
        result.scaled_in,
    )


def both(snap: Snapshot, pending: list[Job], last: CycleResult, now: float) -> CycleResult:
    """The next cycle with the last one's parked jobs skipped, checked against trying all."""
    full = schedule(snap, pending, now=now)
    skipping = schedule(snap, pending, now=now, parked=last.parked)
    assert decisions(skipping) == decisions(full)
    return skipping


def _health(snap: Snapshot, healthy: bool) -> Snapshot:
    """`snap` with the free devices of each cluster's first node made sick (or all healed):
    room appears or goes without any placement changing."""

    def treated(n: Node) -> Node:
        devices = tuple(
            replace(
                d,
                healthy=tuple(
                    healthy or (ok and (u > 0 or m > 0))
                    for ok, u, m in zip(d.healthy, d.used_milli, d.used_memory_mib, strict=True)
                ),
            )
            for d in n.devices
        )
        return replace(n, devices=devices)

    clusters = tuple(
        replace(c, nodes=(treated(c.nodes[0]), *c.nodes[1:])) if c.nodes else c
        for c in snap.clusters
    )
    return replace(snap, clusters=clusters)


@SETTINGS
@given(
    scenarios(),
    job_lists("n", 3, top_priority=6),
    st.sampled_from(
        ["nothing", "newcomers", "one leaves", "all leave", "devices heal", "lowered", "raised"]
    ),
    st.booleans(),
)
def test_skipping_parked_jobs_changes_no_decision(
    scenario: tuple[Snapshot, list[Job]], newcomers: list[Job], change: str, rotate: bool
) -> None:
    """Over three cycles (the second with new jobs, a job gone, devices healed, a running job
    made a preemptible victim or raised out of reach, or nothing changed; one waiting job
    outside its window if `rotate`), the cycles that skip what the one before parked decide
    exactly what trying everything does."""
    snap, pending = scenario
    if change == "devices heal":
        snap = _health(snap, healthy=False)
    first = schedule(snap, pending, now=10)
    after = advance(snap, first)
    if change == "one leaves" and after.placements:
        after = without(after, after.placements[:1])
    if change == "all leave":
        after = without(after, after.placements)
    if change == "devices heal":
        after = _health(after, healthy=True)
    if change in ("lowered", "raised") and after.placements:
        first_placed, *rest = after.placements
        lowered = change == "lowered"
        moved = replace(first_placed.job, priority=0 if lowered else 9, preemptible=lowered)
        after = replace(after, placements=(replace(first_placed, job=moved), *rest))
    waiting = [p.job for p in first.pending]
    if change == "newcomers":
        waiting += newcomers
    unseen = waiting[:1] if rotate else []  # outside the second cycle's window, back after
    second = both(after, waiting[len(unseen) :], first, now=11)
    third = advance(after, second)
    both(third, unseen + [p.job for p in second.pending], second, now=12)


def test_a_lender_is_tried_again_once_a_borrower_placed_before_it_may_be_reclaimed() -> None:
    """A borrower's gang placed earlier in the cycle is no victim in that cycle, but is in the
    next one: the lender left waiting behind it is not parked, and reclaims its quota then."""
    queues = [
        queue("lender", {H100: 8000}, cohort="c"),
        queue("borrower", {H100: 8000}, cohort="c"),
    ]
    snap = snapshot([cluster("a", pool("a", 2))], queues)
    borrower = job("b", H100, count=8, replicas=2, queue="borrower", created_at=0.0)
    lender = job("mine", H100, count=4, queue="lender", created_at=1.0)
    first = schedule(snap, [borrower, lender], now=10)
    assert [p.placement.job.id for p in first.placed] == ["b"]
    assert first.parked is None or "mine" not in first.parked.jobs
    second = both(advance(snap, first), [lender], first, now=11)
    assert [p.preemptor.id for p in second.preempted] == ["mine"]


def test_a_full_fleet_parks_its_queue_until_room_is_freed() -> None:
    """Eight running one-GPU jobs fill the only node: the jobs waiting behind them are parked
    and skipped while nothing changes, and tried (and placed) once one running job leaves."""
    fleet = [cluster("c", [node("n", H100, size=8)])]
    running = [(job(f"r{i}", H100, priority=9, preemptible=False), "c") for i in range(8)]
    snap = snapshot(fleet, [queue("q")], running)
    waiting = [job(f"w{i}", H100, created_at=float(i)) for i in range(3)]
    first = schedule(snap, waiting, now=10)
    assert first.parked is not None and set(first.parked.jobs) == {"w0", "w1", "w2"}
    config = SchedulerConfig()
    assert set(first.parked.skippable(State(snap), config)) == {"w0", "w1", "w2"}
    again = schedule(snap, waiting, now=11, parked=first.parked)
    assert [p.job.id for p in again.pending] == ["w0", "w1", "w2"]
    assert again.parked is not None and set(again.parked.jobs) == {"w0", "w1", "w2"}
    freed = without(snap, snap.placements[:1])
    assert not first.parked.skippable(State(freed), config)
    placed = schedule(freed, waiting, now=12, parked=again.parked)
    assert [p.placement.job.id for p in placed.placed] == ["w0"]


def test_a_job_is_parked_only_if_nothing_changed_after_its_turn() -> None:
    """A job that does not fit, then a smaller one of lower priority that does: the cycle's
    final state is not the one the first one failed against, so it is not parked."""
    fleet = [cluster("c", [node("n", H100, size=8)])]
    running = [(job("r", H100, count=4, priority=9, preemptible=False), "c")]
    snap = snapshot(fleet, [queue("q")], running)
    big = job("big", H100, count=6, priority=5)
    small = job("small", H100, count=1, priority=1)
    first = schedule(snap, [big, small], now=10)
    assert [p.placement.job.id for p in first.placed] == ["small"]
    assert first.parked is None or "big" not in first.parked.jobs
    alone = schedule(snap, [big], now=10)
    assert alone.parked is not None and "big" in alone.parked.jobs


def test_a_parked_job_is_tried_again_when_a_running_job_becomes_its_victim() -> None:
    """Nothing freed and nothing new placed, but the job filling the node was lowered to a
    preemptible priority below the waiting one: the waiting job is tried, and preempts it."""
    fleet = [cluster("c", [node("n", H100, size=8)])]
    high = job("r", H100, count=8, priority=9, preemptible=False)
    snap = snapshot(fleet, [queue("q")], [(high, "c")])
    waiting = job("w", H100, count=4, priority=5)
    first = schedule(snap, [waiting], now=10)
    assert first.parked is not None and "w" in first.parked.jobs
    lowered = replace(high, priority=1, preemptible=True)
    placements = tuple(replace(p, job=lowered) for p in snap.placements)
    second = both(replace(snap, placements=placements), [waiting], first, now=11)
    assert [p.preemptor.id for p in second.preempted] == ["w"]


def test_a_parked_job_outside_a_calm_cycles_window_stays_parked() -> None:
    """The hub reads a rotating window of a long queue: a parked job a cycle does not see stays
    parked through a cycle that changed nothing, and is dropped by one that placed a job."""
    fleet = [cluster("c", [node("n", H100, size=8)])]
    running = [(job("r", H100, count=6, priority=9, preemptible=False), "c")]
    snap = snapshot(fleet, [queue("q")], running)
    wide, wider = job("w4", H100, count=4), job("w3", H100, count=3)
    first = schedule(snap, [wide, wider], now=10)
    assert first.parked is not None and set(first.parked.jobs) == {"w4", "w3"}
    calm = schedule(snap, [wider], now=11, parked=first.parked)
    assert calm.parked is not None and set(calm.parked.jobs) == {"w4", "w3"}
    one = job("w1", H100, count=1)
    busy = schedule(snap, [wider, one], now=12, parked=calm.parked)
    assert [p.placement.job.id for p in busy.placed] == ["w1"]
    assert busy.parked is None or "w4" not in busy.parked.jobs


def test_a_parked_job_is_tried_again_when_devices_heal() -> None:
    """Half the node runs a job, the other half is out of service: the waiting job is parked,
    and placed once the devices are healthy again, though no placement changed."""
    fleet = [cluster("c", [node("n", H100, size=8)])]
    running = [(job("r", H100, count=4, priority=9, preemptible=False), "c")]
    sick = _health(snapshot(fleet, [queue("q")], running), healthy=False)
    waiting = job("w", H100, count=2)
    first = schedule(sick, [waiting], now=10)
    assert first.parked is not None and "w" in first.parked.jobs
    healed = both(_health(sick, healthy=True), [waiting], first, now=11)
    assert [p.placement.job.id for p in healed.placed] == ["w"]


def _lowered(snap: Snapshot, job_id: str, priority: int, preemptible: bool) -> Snapshot:
    """`snap` with running job `job_id` at another priority (and preemptibility)."""
    placements = tuple(
        replace(p, job=replace(p.job, priority=priority, preemptible=preemptible))
        if p.job.id == job_id
        else p
        for p in snap.placements
    )
    return replace(snap, placements=placements)


def test_room_for_another_model_leaves_a_parked_job_parked() -> None:
    """An Ascend node frees its devices: the job waiting for H100s stays parked (skipped), the
    Ascend job waiting beside it is tried and placed."""
    fleet = [cluster("c", [node("h", H100, size=8), node("a", ASCEND, size=8)])]
    running = [
        (job("rh", H100, count=8, priority=9, preemptible=False), "c"),
        (job("ra", ASCEND, count=8, priority=9, preemptible=False), "c"),
    ]
    snap = snapshot(fleet, [queue("q")], running)
    waiting = [job("wh", H100, count=4), job("wa", ASCEND, count=4)]
    first = schedule(snap, waiting, now=10)
    assert first.parked is not None and set(first.parked.jobs) == {"wh", "wa"}
    freed = without(snap, [p for p in snap.placements if p.job.id == "ra"])
    assert set(first.parked.skippable(State(freed), SchedulerConfig())) == {"wh"}
    second = both(freed, waiting, first, now=11)
    assert [p.placement.job.id for p in second.placed] == ["wa"]


def test_cpu_freed_on_a_node_without_devices_wakes_a_cpu_only_job() -> None:
    """A CPU-only job waits for a full CPU node; the running one leaves: it is tried again
    and placed, though no device anywhere changed."""
    fleet = [cluster("c", [node("cpu", None, cpu=8000)])]
    snap = snapshot(fleet, [queue("q")], [(job("r", cpu=8000, priority=9), "c")])
    waiting = [job("w", cpu=4000)]
    first = schedule(snap, waiting, now=10)
    assert first.parked is not None and "w" in first.parked.jobs
    second = both(without(snap, snap.placements), waiting, first, now=11)
    assert [p.placement.job.id for p in second.placed] == ["w"]


def test_a_victim_in_another_queue_wakes_the_higher_priority_jobs_only() -> None:
    """A running job of another queue is lowered below one waiting job and above another:
    the first is tried (and preempts it), the second stays parked."""
    fleet = [cluster("c", [node("n", H100, size=8)])]
    queues = [queue("q"), queue("other")]
    running = [(job("r", H100, count=8, queue="other", priority=9, preemptible=False), "c")]
    snap = snapshot(fleet, queues, running)
    waiting = [job("high", H100, count=4, priority=5), job("low", H100, count=4, priority=1)]
    first = schedule(snap, waiting, now=10)
    assert first.parked is not None and set(first.parked.jobs) == {"high", "low"}
    lowered = _lowered(snap, "r", priority=3, preemptible=True)
    assert set(first.parked.skippable(State(lowered), SchedulerConfig())) == {"low"}
    second = both(lowered, waiting, first, now=11)
    assert [p.preemptor.id for p in second.preempted] == ["high"]


def test_an_elastic_job_lowered_to_a_parked_jobs_priority_may_give_it_replicas() -> None:
    """A non-preemptible elastic job of another queue above its minimum fills the node; lowered
    to the waiting job's priority, it is shrinkable: the waiting job is tried and takes its
    surplus."""
    fleet = [cluster("c", [node("n", H100, size=8)])]
    queues = [queue("q"), queue("other")]
    elastic = job("e", H100, count=2, replicas=4, elastic=(1, 4), queue="other", priority=9)
    running = [(replace(elastic, preemptible=False), "c")]
    snap = snapshot(fleet, queues, running)
    waiting = [job("w", H100, count=4, priority=5)]
    first = schedule(snap, waiting, now=10)
    assert first.parked is not None and "w" in first.parked.jobs
    lowered = _lowered(snap, "e", priority=5, preemptible=False)
    second = both(lowered, waiting, first, now=11)
    assert [p.preemptor.id for p in second.preempted] == ["w"] and second.preempted[0].shrunk


def test_usage_moved_in_its_quota_pool_wakes_a_quota_blocked_job() -> None:
    """A job waits for its queue's CPU quota while H100s are free; a CPU-only job of its
    queue leaves a node without devices: no room it could use grew, but its quota did."""
    fleet = [cluster("c", [node("cpu", None, cpu=64_000), node("g", H100, size=8)])]
    queues = [queue("q", {"cpu": 8000})]
    snap = snapshot(fleet, queues, [(job("r", cpu=8000, priority=9, preemptible=False), "c")])
    waiting = [job("w", H100, count=1, cpu=4000)]
    first = schedule(snap, waiting, now=10)
    assert first.parked is not None and "w" in first.parked.jobs
    second = both(without(snap, snap.placements), waiting, first, now=11)
    assert [p.placement.job.id for p in second.placed] == ["w"]
