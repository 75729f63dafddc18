"""Elastic jobs: start at min, grow into capacity nothing waits for, shrink before evicting,
scale in to a lowered ceiling (a service shard's cap) first of all."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from federation.scheduling.cycle import schedule
from federation.scheduling.decisions import CycleResult
from federation.scheduling.elastic import SCALED_IN, at_floor
from federation.scheduling.flavors import FlavorAssigner, assignments
from federation.scheduling.framework import JobContext, SchedulerConfig
from federation.scheduling.model import Elastic, Job, Snapshot
from federation.scheduling.plugins import DEFAULT_REGISTRY
from federation.scheduling.state import State

from .builders import ASCEND, H100, advance, cluster, job, pool, queue, snapshot, without
from .test_invariants import MODELS, QUEUES, check_capacity_and_quota, fleets, queue_sets

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)
NO_BACKFILL = SchedulerConfig(backfill=False)  # no reservation pins a job against shrinking


def elastic(id: str, low: int, high: int, **kwargs: object) -> Job:
    return job(id, H100, replicas=low, elastic=(low, high), **kwargs)  # type: ignore[arg-type]


def held(snap: Snapshot, job_id: str) -> int:
    return next(p.job.tasks[0].replicas for p in snap.placements if p.job.id == job_id)


def test_starts_at_min_and_grows_to_max_into_idle_devices() -> None:
    snap = snapshot([cluster("a", pool("a", 1))])  # 8 devices
    first = schedule(snap, [elastic("e", 2, 6)], now=0)
    assert [p.placement.job.tasks[0].replicas for p in first.placed] == [2]
    assert not first.grown  # placed this cycle: it grows from the next
    snap = advance(snap, first)
    second = schedule(snap, [], now=1)
    (grown,) = second.grown
    assert grown.counts == {"main": (2, 6)}
    assert len(grown.placement.replicas) == 6
    check_capacity_and_quota(snap, second)
    assert not schedule(advance(snap, second), [], now=2).grown  # at max


def test_does_not_grow_into_capacity_an_equal_priority_job_waits_for() -> None:
    snap = snapshot([cluster("a", pool("a", 1))], running=[(elastic("e", 2, 8), "a")])
    waiting = job("w", H100, count=8)  # needs the whole node: only eviction could help
    result = schedule(snap, [waiting], now=0, config=SchedulerConfig(preemption=False))
    assert result.pending and not result.grown


def test_grows_where_what_it_takes_is_not_what_the_waiting_job_asks_for() -> None:
    """A job waiting for Ascend, by capacity on the cluster or by its queue's Ascend quota,
    does not stop the growth of a job on H100s there (the demo's case)."""
    nodes = pool("a", 1) + pool("b", 1, ASCEND)
    queues = [queue("q", {ASCEND: 8000})]
    snap = snapshot([cluster("a", nodes)], queues, running=[(elastic("e", 2, 8), "a")])
    too_big = job("w", ASCEND, count=16)  # no node has 16: capacity stops it
    (grown,) = schedule(snap, [too_big], now=0, config=NO_BACKFILL).grown
    assert grown.counts == {"main": (2, 8)}
    over_quota = job("w", ASCEND, count=8, replicas=2)  # 16 of the queue's 8
    (grown,) = schedule(snap, [over_quota], now=0, config=NO_BACKFILL).grown
    assert grown.counts == {"main": (2, 8)}


def test_grows_only_within_quota() -> None:
    queues = [queue("q", {H100: 3000})]
    snap = snapshot([cluster("a", pool("a", 1))], queues, running=[(elastic("e", 2, 8), "a")])
    (grown,) = schedule(snap, [], now=0).grown
    assert grown.counts == {"main": (2, 3)}


def test_shrinks_instead_of_evicting_and_grows_back_when_the_urgent_job_leaves() -> None:
    fleet = [cluster("a", pool("a", 1))]
    snap = snapshot(fleet, running=[(elastic("e", 2, 6), "a"), (job("low", H100, count=2), "a")])
    snap = advance(snap, schedule(snap, [], now=0))
    assert held(snap, "e") == 6
    urgent = job("u", H100, count=2, priority=5, preemptible=False)
    result = schedule(snap, [urgent], now=1)
    (preempted,) = result.preempted
    assert preempted.victims == ()  # the low-priority job stays: shrinking is cheaper
    (shrunk,) = preempted.shrunk
    assert shrunk.counts == {"main": (6, 4)}  # only what the urgent job needs
    assert "shrinking 1 elastic job" in preempted.reason
    snap = advance(snap, result)
    placed = schedule(snap, [urgent], now=2)
    assert [p.placement.job.id for p in placed.placed] == ["u"] and not placed.grown
    snap = advance(snap, placed)
    snap = without(snap, [p for p in snap.placements if p.job.id == "u"])
    (back,) = schedule(snap, [], now=3).grown
    assert back.counts == {"main": (4, 6)}


def test_never_shrinks_below_min_then_evicts() -> None:
    snap = snapshot([cluster("a", pool("a", 1))], running=[(elastic("e", 4, 8), "a")])
    snap = advance(snap, schedule(snap, [], now=0))
    urgent = job("u", H100, count=8, priority=5)
    (preempted,) = schedule(snap, [urgent], now=1).preempted
    assert [v.job.id for v in preempted.victims] == ["e"] and not preempted.shrunk


@st.composite
def elastic_scenarios(draw: st.DrawFn) -> tuple[Snapshot, list[Job], list[Job]]:
    """A fleet, elastic and fixed jobs to run, and urgent jobs arriving one per cycle."""
    base = [
        job(
            f"e{i}",
            *draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=2, unique=True)),
            queue=draw(st.sampled_from(QUEUES)),
            count=draw(st.sampled_from([1, 2, 4])),
            replicas=(low := draw(st.integers(1, 2))),
            elastic=(low, low + draw(st.integers(0, 12))),
            priority=draw(st.integers(0, 2)),
            preemptible=draw(st.booleans()),
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    base += [
        job(
            f"f{i}",
            draw(st.sampled_from(MODELS)),
            queue=draw(st.sampled_from(QUEUES)),
            count=draw(st.sampled_from([1, 2, 4])),
            priority=draw(st.integers(0, 2)),
        )
        for i in range(draw(st.integers(0, 2)))
    ]
    urgent = [
        job(
            f"u{i}",
            draw(st.sampled_from(MODELS)),
            queue=draw(st.sampled_from(QUEUES)),
            count=draw(st.sampled_from([1, 2, 4, 8])),
            replicas=draw(st.integers(1, 2)),
            priority=draw(st.integers(1, 4)),
            preemptible=False,
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    return snapshot(draw(fleets()), draw(queue_sets())), base, urgent


def check_bounds(snap: Snapshot) -> None:
    for p in snap.placements:
        for t, task in enumerate(p.job.tasks):
            assert task.floor <= task.replicas <= task.ceiling, (p.job.id, task)
            assert sum(1 for r in p.replicas if r.task == t) == task.replicas


def shrinking_alone_fits(snap: Snapshot, urgent: Job) -> bool:
    """Oracle: with every elastic job the urgent one may shrink at its minimum, does it fit?"""
    state = State(snap)
    for p in list(state.elastic.values()):
        if p.job.priority <= urgent.priority and p.job.id not in state.preempting:
            state.resize(p, at_floor(p))
    ctx = JobContext(urgent, state, NO_BACKFILL, assignments(urgent, NO_BACKFILL))
    fits = FlavorAssigner(DEFAULT_REGISTRY.profile(NO_BACKFILL))
    return any(fits(ctx, c).status.ok for c in state.clusters.values())


@SETTINGS
@given(elastic_scenarios())
def test_elastic_invariants_over_cycles(scenario: tuple[Snapshot, list[Job], list[Job]]) -> None:
    snap, base, urgent = scenario
    arrivals = [base, [], *([u] for u in urgent), [], []]  # they meet grown jobs
    waiting: list[Job] = []
    for now, new in enumerate(arrivals):
        waiting = [*waiting, *new]
        result: CycleResult = schedule(snap, waiting, now=float(now), config=NO_BACKFILL)
        check_capacity_and_quota(snap, result)  # nothing double-allocated, quota kept
        for preempted in result.preempted:
            for r in preempted.shrunk:  # shrinking gives back surplus only
                assert r.placement.job.priority <= preempted.preemptor.priority
            if preempted.victims:
                assert not shrinking_alone_fits(snap, preempted.preemptor), preempted.reason
            else:
                assert preempted.shrunk
        snap = advance(snap, result)
        check_bounds(snap)  # never below min, never above max, replicas all known
        decided = {p.placement.job.id for p in result.placed}
        decided |= {r.job.id for r in result.rejected}
        waiting = [j for j in waiting if j.id not in decided]


def capped(snap: Snapshot, ceilings: dict[str, int]) -> Snapshot:
    """`snap` with the elastic jobs named in `ceilings` allowed at most that many replicas
    (never below their floor), as the hub models a shard's lowered cap."""
    placements = []
    for p in snap.placements:
        task = p.job.tasks[0]
        if p.job.id in ceilings and task.elastic is not None:
            low = task.elastic.min
            ceiling = max(low, min(task.elastic.max, ceilings[p.job.id]))
            task = replace(task, elastic=Elastic(low, ceiling))
            p = replace(p, job=replace(p.job, tasks=(task,)))
        placements.append(p)
    return replace(snap, placements=tuple(placements))


def test_a_job_above_its_ceiling_is_scaled_in_first_and_what_it_frees_is_used_at_once() -> None:
    snap = snapshot([cluster("a", pool("a", 1))], running=[(elastic("e", 1, 8), "a")])
    snap = advance(snap, schedule(snap, [], now=0))
    assert held(snap, "e") == 8
    waiting = job("w", H100, count=5)
    result = schedule(capped(snap, {"e": 3}), [waiting], now=1, config=NO_BACKFILL)
    (scaled,) = result.scaled_in
    assert (scaled.counts, scaled.reason) == ({"main": (8, 3)}, SCALED_IN)
    assert "scaled in" in scaled.message
    assert [p.placement.job.id for p in result.placed] == ["w"]  # into what it gave back
    assert not result.preempted and not result.grown
    check_capacity_and_quota(capped(snap, {"e": 3}), result)


def test_a_job_scaled_in_and_shrunk_for_a_preemptor_resizes_in_two_steps() -> None:
    snap = snapshot([cluster("a", pool("a", 1))], running=[(elastic("e", 1, 8), "a")])
    snap = advance(snap, schedule(snap, [], now=0))
    urgent = job("u", H100, count=6, priority=5, preemptible=False)
    result = schedule(capped(snap, {"e": 6}), [urgent], now=1, config=NO_BACKFILL)
    (scaled,) = result.scaled_in
    (preempted,) = result.preempted
    (shrunk,) = preempted.shrunk
    assert scaled.counts == {"main": (8, 6)} and shrunk.counts == {"main": (6, 2)}
    assert result.resized == (scaled, shrunk)
    check_bounds(advance(capped(snap, {"e": 6}), result))


@SETTINGS
@given(elastic_scenarios(), st.data())
def test_after_a_cycle_no_job_holds_more_than_its_ceiling_nor_less_than_its_floor(
    scenario: tuple[Snapshot, list[Job], list[Job]], data: st.DataObject
) -> None:
    snap, base, urgent = scenario
    waiting: list[Job] = []
    for now, new in enumerate([base, [], *([u] for u in urgent), [], []]):
        waiting = [*waiting, *new]
        placed = [p.job.id for p in snap.placements if p.job.elastic]
        if placed:
            snap = capped(
                snap, data.draw(st.dictionaries(st.sampled_from(placed), st.integers(0, 8)))
            )
        result = schedule(snap, waiting, now=float(now), config=NO_BACKFILL)
        check_capacity_and_quota(snap, result)
        for r in result.scaled_in:
            assert all(b > a for a, b in ((n, o) for o, n in r.counts.values()))
        snap = advance(snap, result)
        check_bounds(snap)
        decided = {p.placement.job.id for p in result.placed}
        decided |= {r.job.id for r in result.rejected}
        waiting = [j for j in waiting if j.id not in decided]
