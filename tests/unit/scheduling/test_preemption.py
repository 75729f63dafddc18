"""Preemption: who is evicted, where, and that every dry run leaves the state as it was."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

import federation.scheduling.cycle as cycle_module
import federation.scheduling.preemption as preemption_module
from federation.scheduling.cycle import schedule
from federation.scheduling.decisions import CycleResult
from federation.scheduling.flavors import FitCheck, FlavorAssigner, assignments
from federation.scheduling.framework import JobContext, SchedulerConfig
from federation.scheduling.model import Placement, ReplicaPlacement
from federation.scheduling.plugins import DEFAULT_REGISTRY
from federation.scheduling.preemption import Preemption, find_preemption
from federation.scheduling.state import ClusterState, State

from .builders import ASCEND, H100, cluster, job, pool, queue, snapshot


def victims(result: CycleResult) -> list[str]:
    return sorted(v.job.id for p in result.preempted for v in p.victims)


@pytest.fixture(autouse=True)
def searches_leave_no_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrap every victim search of the cycle: the state must be unchanged afterwards."""

    def checked(
        ctx: JobContext, clusters: Sequence[ClusterState], fits: FitCheck
    ) -> Preemption | None:
        before = ctx.state.fingerprint()
        found = find_preemption(ctx, clusters, fits)
        assert ctx.state.fingerprint() == before
        return found

    monkeypatch.setattr(cycle_module, "find_preemption", checked)


def test_only_lower_priority_preemptible_jobs_are_victims() -> None:
    running = [
        (job("same", H100, count=4, priority=5), "a"),
        (job("keep", H100, count=4, priority=1, preemptible=False), "a"),
        (job("low", H100, count=4, priority=1, runtime_s=5), "a2"),
    ]
    snap = snapshot([cluster("a", pool("a", 1)), cluster("a2", pool("b", 1))], running=running)
    result = schedule(snap, [job("hi", H100, count=8, priority=5)], now=0)
    # "same" is not lower and "keep" not preemptible: only a2, where "low" runs, can help.
    assert victims(result) == ["low"]
    assert result.preempted[0].reservation.cluster == "a2"


def test_cheapest_victim_set_fewest_lowest_priority_least_run_time() -> None:
    running = [
        (job("old", H100, count=4, priority=1, runtime_s=3600), "a"),
        (job("new", H100, count=4, priority=1, runtime_s=60), "a"),
        (job("mid", H100, count=4, priority=2, runtime_s=10), "b"),
        (job("mid2", H100, count=4, priority=2, runtime_s=10), "b"),
    ]
    fleet = [cluster("a", pool("a", 1)), cluster("b", pool("b", 1))]
    result = schedule(
        snapshot(fleet, running=running), [job("hi", H100, count=4, priority=9)], now=0
    )
    assert victims(result) == ["new"]
    assert result.preempted[0].reservation.cluster == "a"


def test_gangs_leave_whole() -> None:
    running = [(job("gang", H100, count=2, replicas=4, priority=1), "a")]
    result = schedule(
        snapshot([cluster("a", pool("a", 1))], running=running),
        [job("hi", H100, count=2, priority=9)],
        now=0,
    )
    assert victims(result) == ["gang"]  # all four replicas leave together


def test_put_back_keeps_victims_that_are_not_needed() -> None:
    # Cheapest-first removal takes "tiny" first, but its node stays blocked; only "big" frees
    # a node, so "tiny" is put back.
    running = [
        (job("tiny", H100, count=1, priority=0), "a"),
        (job("blocker", H100, count=7, priority=5, preemptible=False), "a"),
        (job("big", H100, count=8, priority=1), "a"),
    ]
    fleet = [cluster("a", pool("a", 2))]
    result = schedule(
        snapshot(fleet, running=running), [job("hi", H100, count=8, priority=9)], now=0
    )
    assert victims(result) == ["big"]


def test_never_evicts_for_a_job_that_still_would_not_fit() -> None:
    running = [(job("low", ASCEND, count=8, priority=0), "a")]
    fleet = [cluster("a", pool("a", 1, ASCEND)), cluster("b", pool("b", 1))]
    snap = snapshot(fleet, running=running)
    # 2 replicas of 8 never fit in "a" (one node): no victims even though "low" is cheaper.
    result = schedule(snap, [job("hi", ASCEND, count=8, replicas=2, priority=9)], now=0)
    assert not result.preempted


def test_preemption_can_be_disabled() -> None:
    running = [(job("low", H100, count=8, priority=0), "a")]
    snap = snapshot([cluster("a", pool("a", 1))], running=running)
    off = SchedulerConfig(preemption=False)
    result = schedule(snap, [job("hi", H100, count=8, priority=9)], now=0, config=off)
    assert not result.preempted and result.pending


def test_lending_queue_reclaims_borrowed_quota_at_equal_priority() -> None:
    queues = [
        queue("lender", {H100: 8000}, cohort="c"),
        queue("borrower", {H100: 8000}, cohort="c"),
    ]
    running = [(job(f"b{i}", H100, count=8, queue="borrower"), "a") for i in range(2)]
    snap = snapshot([cluster("a", pool("a", 3))], queues, running)
    result = schedule(snap, [job("mine", H100, count=8, queue="lender")], now=0)
    assert victims(result) == ["b0"]
    # Within one queue, equal priority never preempts.
    same = schedule(snap, [job("more", H100, count=8, queue="borrower")], now=0)
    assert not same.preempted


def test_victims_of_one_preemption_are_not_taken_twice_in_a_cycle() -> None:
    running = [(job("low", H100, count=8, priority=0), "a")]
    snap = snapshot([cluster("a", pool("a", 1))], running=running)
    jobs = [job("hi1", H100, count=8, priority=9), job("hi2", H100, count=8, priority=8)]
    result = schedule(snap, jobs, now=0)
    assert [p.preemptor.id for p in result.preempted] == ["hi1"]
    assert [p.job.id for p in result.pending] == ["hi2"]


def test_a_cluster_without_candidates_is_looked_at_once_per_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ten alike jobs wait behind two clusters of jobs they may not evict: each cluster's
    candidates are gathered for the first job only; a job of another priority looks again."""
    looked: list[str] = []
    gather = preemption_module._candidate_groups

    def counted(
        ctx: JobContext, cluster: ClusterState, scope: preemption_module.Scope
    ) -> preemption_module._Pool:
        looked.append(cluster.name)
        return gather(ctx, cluster, scope)

    monkeypatch.setattr(preemption_module, "_candidate_groups", counted)
    running = [
        (job("a-keep", H100, count=8, priority=9), "a"),
        (job("b-keep", H100, count=8, priority=1, preemptible=False), "b"),
    ]
    snap = snapshot([cluster("a", pool("a", 1)), cluster("b", pool("b", 1))], running=running)
    alike = [job(f"w{i}", H100, count=4, priority=5, created_at=float(i)) for i in range(10)]
    result = schedule(snap, [*alike, job("other", H100, count=4, priority=4)], now=0)
    assert len(result.pending) == 11 and not result.preempted
    assert sorted(looked) == ["a", "a", "b", "b"]


def test_a_gang_victim_frees_every_node_it_spans() -> None:
    running = [(job("gang", H100, count=8, replicas=2, priority=0), "a")]
    snap = snapshot([cluster("a", pool("a", 2))], running=running)
    result = schedule(snap, [job("hi", H100, count=4, replicas=3, priority=5)], now=0)
    assert victims(result) == ["gang"]


def test_jobs_placed_in_this_cycle_are_never_victims() -> None:
    queues = [
        queue("lender", {H100: 8000}, cohort="c"),
        queue("borrower", {H100: 8000}, cohort="c"),
    ]
    snap = snapshot([cluster("a", pool("a", 2))], queues)
    state = State(snap)
    eight = tuple(range(8))
    fresh = Placement(
        job("b", H100, count=8, replicas=2, queue="borrower"),
        "a",
        (H100,),
        (ReplicaPlacement(0, "a-0", eight), ReplicaPlacement(0, "a-1", eight)),
    )
    state.place(fresh)  # borrows the lender's quota, placed this cycle
    lender_job = job("mine", H100, count=8, queue="lender")
    ctx = JobContext(
        lender_job, state, SchedulerConfig(), assignments(lender_job, SchedulerConfig())
    )
    fits = FlavorAssigner(DEFAULT_REGISTRY.profile(SchedulerConfig()))
    assert find_preemption(ctx, [state.clusters["a"]], fits) is None
    # The same placement made in an earlier cycle is reclaimed.
    earlier = State(snapshot([cluster("a", pool("a", 2))], queues, [(fresh.job, "a")]))
    ctx = JobContext(lender_job, earlier, SchedulerConfig(), ctx.assignments)
    found = find_preemption(ctx, [earlier.clusters["a"]], fits)
    assert found is not None and [v.job.id for v in found.victims] == ["b"]


# --- checkpoint-aware cost ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runtime", "interval", "since", "lost"),
    [
        (3600, None, None, 3600),  # no checkpoint: everything since the start
        (3700, 1800, None, 100),  # one every 30 minutes from the start: the last at 3600
        (3600, None, 60, 60),  # the last one reported a minute ago
        (3700, 1800, 500, 100),  # the later of the two counts
        (3700, 1800, 20, 20),
        (100, None, 500, 100),  # a report from before this run started: since the start
    ],
)
def test_work_lost_counts_from_the_latest_checkpoint(
    runtime: float, interval: float | None, since: float | None, lost: float
) -> None:
    j = job("j", H100, runtime_s=runtime, checkpoint_interval_s=interval, since_checkpoint_s=since)
    assert j.lost_s == lost


def test_lost_work_is_weighted_by_devices_or_pods() -> None:
    four = Placement(job("g", H100, count=2, replicas=2, runtime_s=10), "a", (H100,))
    assert four.lost_work == 40
    share = Placement(job("s", H100, milli=250, runtime_s=100), "a", (H100,))
    assert share.lost_work == 25
    cpu = Placement(job("c", replicas=3, runtime_s=10), "a", ("",))
    assert cpu.lost_work == 30


def test_a_victim_that_just_checkpointed_is_preferred() -> None:
    running = [
        (job("fresh", H100, count=8, priority=1, runtime_s=600), "a"),
        (job("saved", H100, count=8, priority=1, runtime_s=7200, since_checkpoint_s=30), "b"),
        (
            job("periodic", H100, count=8, priority=1, runtime_s=3610, checkpoint_interval_s=1800),
            "c",
        ),
    ]
    fleet = [cluster(c, pool(c, 1)) for c in "abc"]
    config = SchedulerConfig(preemption_compare=0)
    result = schedule(
        snapshot(fleet, running=running),
        [job("hi", H100, count=8, priority=9)],
        now=0,
        config=config,
    )
    assert victims(result) == ["periodic"]  # 10 s lost x 8 devices, against 30 s and 600 s
    assert "80 device-seconds of work lost" in result.preempted[0].reason


def test_more_victims_are_preferred_when_they_lose_less_work() -> None:
    running = [
        (job("big", H100, count=8, priority=1, runtime_s=3600), "a"),
        (job("half1", H100, count=4, priority=1, runtime_s=3600, since_checkpoint_s=5), "b"),
        (job("half2", H100, count=4, priority=1, runtime_s=3600, since_checkpoint_s=5), "b"),
    ]
    fleet = [cluster("a", pool("a", 1)), cluster("b", pool("b", 1))]
    result = schedule(
        snapshot(fleet, running=running), [job("hi", H100, count=8, priority=9)], now=0
    )
    assert victims(result) == ["half1", "half2"]


def test_priority_still_comes_before_work_lost() -> None:
    running = [
        (job("low", H100, count=8, priority=0, runtime_s=86400), "a"),
        (job("mid", H100, count=8, priority=1, since_checkpoint_s=0), "b"),
    ]
    fleet = [cluster("a", pool("a", 1)), cluster("b", pool("b", 1))]
    result = schedule(
        snapshot(fleet, running=running), [job("hi", H100, count=8, priority=9)], now=0
    )
    assert victims(result) == ["low"]


def test_a_preemptor_waits_for_what_it_shrank_to_leave_rather_than_preempting_again() -> None:
    """An urgent job shrinks an elastic job from 4 replicas to 2 and holds what they free. In
    the next cycle the cluster still reports the two removed replicas' devices as used: the
    urgent job's hold is short of them, so it waits for them to leave instead of shrinking
    the elastic job further or evicting it; once they are gone, it is placed."""
    elastic = job("e", H100, count=2, replicas=4, elastic=(1, 4), priority=1)
    snap = snapshot([cluster("a", pool("a", 1))], running=[(elastic, "a")])
    urgent = job("urgent", H100, count=4, priority=9)
    first = schedule(snap, [urgent], now=0)
    (preempted,) = first.preempted
    assert not preempted.victims and [r.counts for r in preempted.shrunk] == [{"main": (4, 2)}]
    shrunk = preempted.shrunk[0].placement
    leaving = replace(snap, placements=(shrunk,), reservations=(preempted.reservation,))
    second = schedule(leaving, [urgent], now=1)
    assert not second.preempted and not second.placed
    assert [p.job.id for p in second.pending] == ["urgent"]
    gone = snapshot([cluster("a", pool("a", 1))], running=[(shrunk.job, "a")])
    third = schedule(replace(gone, reservations=(preempted.reservation,)), [urgent], now=2)
    assert [p.placement.job.id for p in third.placed] == ["urgent"] and not third.preempted
