"""Reservations for large gangs and backfill around them: scenarios and hypothesis properties."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from federation.scheduling.cycle import schedule
from federation.scheduling.decisions import CycleResult, Reserved
from federation.scheduling.framework import SchedulerConfig
from federation.scheduling.model import Job, Snapshot
from federation.scheduling.state import State

from .builders import H100, advance, cluster, job, pool, snapshot, without
from .test_invariants import (
    SETTINGS,
    check_capacity_and_quota,
    fleets,
    job_lists,
    queue_sets,
)

NOW = 10.0


def gang(id: str = "gang", **kwargs: object) -> Job:
    """Two replicas of 8 H100: a whole two-node cluster."""
    return job(id, H100, count=8, replicas=2, **kwargs)  # type: ignore[arg-type]


def two_nodes(*running: tuple[Job, str]) -> Snapshot:
    return snapshot([cluster("a", pool("a", 2))], running=running)


def by_id(result: CycleResult) -> dict[str, str]:
    """What happened to each job: the cluster it was placed on, or "pending"."""
    out = {p.placement.job.id: p.placement.cluster for p in result.placed}
    out.update({p.job.id: "pending" for p in result.pending})
    return out


def test_a_waiting_gang_reserves_until_the_running_jobs_end() -> None:
    snap = two_nodes(
        (job("long", H100, count=8, max_runtime_s=100), "a"),
        (job("short", H100, count=4, max_runtime_s=50), "a"),
    )
    result = schedule(snap, [gang()], now=0)
    (reserved,) = result.reserved
    assert reserved.start == 100 and reserved.placement.cluster == "a"
    assert reserved.relies_on == ("long", "short")
    assert len(reserved.placement.replicas) == 2
    (pending,) = result.pending
    assert "reserved on a, expected start 100" in pending.message


def test_only_jobs_that_end_before_the_start_use_the_reserved_capacity() -> None:
    snap = two_nodes(
        (job("long", H100, count=8, max_runtime_s=100), "a"),
        (job("short", H100, count=4, max_runtime_s=50), "a"),
    )
    later = [
        gang(),
        job("quick", H100, count=2, created_at=1, max_runtime_s=60),
        job("slow", H100, count=2, created_at=2, max_runtime_s=500),
        job("unknown", H100, count=2, created_at=3),
    ]
    result = schedule(snap, later, now=0)
    assert by_id(result) == {
        "gang": "pending",
        "quick": "a",  # ends at 60, before the gang starts at 100
        "slow": "pending",
        "unknown": "pending",
    }
    slow = next(p for p in result.pending if p.job.id == "slow")
    assert "capacity reserved for job gang (expected start 100)" in slow.message
    off = schedule(snap, later, now=0, config=SchedulerConfig(backfill=False))
    assert by_id(off)["slow"] == "a" and not off.reserved  # 4 free: quick and slow take them


def test_a_backfilled_job_shrinks_the_hold_by_what_it_took() -> None:
    snap = two_nodes((job("long", H100, count=8, max_runtime_s=100), "a"))
    # 8 devices free now on one node, held for the gang: two quick jobs take 4 each, then
    # nothing is left for a job that would outlive the reservation's start.
    later = [
        gang(),
        job("q1", H100, count=4, created_at=1, max_runtime_s=90),
        job("q2", H100, count=4, created_at=2, max_runtime_s=90),
        job("q3", H100, count=4, created_at=3, max_runtime_s=90),
    ]
    result = schedule(snap, later, now=0)
    assert by_id(result) == {"gang": "pending", "q1": "a", "q2": "a", "q3": "pending"}


def test_no_reservation_when_a_running_job_has_no_limit() -> None:
    snap = two_nodes((job("forever", H100, count=8), "a"))
    result = schedule(snap, [gang(), job("other", H100, count=4, created_at=1)], now=0)
    assert not result.reserved
    assert by_id(result)["other"] == "a"  # nothing to protect: no capacity is kept idle


def test_small_or_recent_jobs_earn_no_reservation() -> None:
    snap = two_nodes((job("long", H100, count=8, max_runtime_s=100), "a"))
    small = job("small", H100, count=4, replicas=3, created_at=0)
    assert schedule(snap, [small], now=0).reserved  # 12 devices, the minimum is 8
    assert not schedule(
        snap, [small], now=0, config=SchedulerConfig(reservation_min_devices=16)
    ).reserved
    patient = SchedulerConfig(reservation_min_wait_s=60)
    assert not schedule(snap, [gang()], now=30, config=patient).reserved
    assert schedule(snap, [gang()], now=60, config=patient).reserved


def test_one_reservation_per_queue_by_default() -> None:
    snap = two_nodes((job("long", H100, count=8, max_runtime_s=100), "a"))
    jobs = [gang("g1"), gang("g2", created_at=1)]
    assert [r.placement.job.id for r in schedule(snap, jobs, now=0).reserved] == ["g1"]
    two = SchedulerConfig(reservations_per_queue=2)
    reserved = schedule(snap, jobs, now=0, config=two).reserved
    # the second is estimated with the first in place, which never ends for the estimate
    assert [r.placement.job.id for r in reserved] == ["g1"]


def test_jobs_a_reservation_counts_on_are_no_victims_for_later_jobs() -> None:
    snap = two_nodes(
        (job("low", H100, count=8, priority=1, max_runtime_s=50), "a"),
        (job("kept", H100, count=8, preemptible=False, max_runtime_s=100), "a"),
    )
    jobs = [gang(priority=3), job("mid", H100, count=8, priority=2)]
    result = schedule(snap, jobs, now=0)
    assert result.reserved and not result.preempted  # "mid" may not evict "low"
    off = schedule(snap, jobs, now=0, config=SchedulerConfig(backfill=False))
    assert [p.preemptor.id for p in off.preempted] == ["mid"]


# --- properties ------------------------------------------------------------------------------

BACKFILL = SchedulerConfig(reservation_min_devices=2, reservations_per_queue=2)
RUNTIMES = st.sampled_from([None, 30.0, 300.0, 3000.0])


@st.composite
def timed(draw: st.DrawFn, jobs: list[Job]) -> list[Job]:
    """`jobs` with random maximum run times (None: no limit)."""
    return [replace(j, max_runtime_s=draw(RUNTIMES)) for j in jobs]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Snapshot, list[Job]]:
    """Running jobs (placed by the core) and pending ones, all with random run time limits."""
    empty = snapshot(draw(fleets()), draw(queue_sets()))
    first = schedule(empty, draw(timed(draw(job_lists("r", 10, top_priority=3)))), now=0)
    return advance(empty, first), draw(timed(draw(job_lists("p", 8, top_priority=6))))


def state_at_start(snap: Snapshot, result: CycleResult, reserved: Reserved, now: float) -> State:
    """The fleet at `reserved.start` as the runtimes given say: the running jobs ending by then
    and this cycle's victims gone, what this cycle placed that outlives the start running,
    preemptors holding their reservations (as the next cycle holds them), and the reservations
    starting by then in place."""
    start = reserved.start
    victims = {v.job.id for p in result.preempted for v in p.victims}
    gone = [p for p in snap.placements if p.job.ends_at(now) <= start or p.job.id in victims]
    state = State(without(snap, gone))
    for placed in result.placed:
        p = placed.placement
        if p.job.ends_at(now) > start:
            state.unhold(p.job.id)
            state.place(p)  # raises DeviceConflict on a device taken twice
    for preempted in result.preempted:  # held as the next cycle holds them
        state.hold(preempted.reservation)
    for other in result.reserved:
        if other.start <= start:
            state.place(other.placement)
    return state


@SETTINGS
@given(scenarios())
def test_backfilled_jobs_never_delay_a_reserved_gang(
    scenario: tuple[Snapshot, list[Job]],
) -> None:
    snap, pending = scenario
    result = schedule(snap, pending, now=NOW, config=BACKFILL)
    for reserved in result.reserved:
        state = state_at_start(snap, result, reserved, NOW)
        for c in state.clusters.values():
            for n in c.nodes:
                assert n.cpu_free >= 0 and n.memory_free >= 0 and n.pods_free >= 0, (
                    f"{reserved.placement.job.id} cannot start at {reserved.start} on {n.node.name}"
                )
        assert reserved.start >= NOW


@SETTINGS
@given(scenarios())
def test_cycle_invariants_hold_with_reservations(scenario: tuple[Snapshot, list[Job]]) -> None:
    snap, pending = scenario
    result = schedule(snap, pending, now=NOW, config=BACKFILL)
    check_capacity_and_quota(snap, result)
    assert schedule(snap, pending, now=NOW, config=BACKFILL) == result
    waiting = {p.job.id for p in result.pending}
    assert {r.placement.job.id for r in result.reserved} <= waiting
    decided = [p.placement.job.id for p in result.placed] + [
        p.preemptor.id for p in result.preempted
    ]
    decided += [p.job.id for p in result.pending] + [r.job.id for r in result.rejected]
    assert sorted(decided) == sorted(j.id for j in pending)
