"""Checkpoint-aware victim choice over random fleets: the cheapest set the search considered."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from federation.scheduling.cycle import schedule
from federation.scheduling.flavors import FlavorAssigner, assignments
from federation.scheduling.framework import JobContext, SchedulerConfig
from federation.scheduling.model import Job, Snapshot
from federation.scheduling.plugins import DEFAULT_REGISTRY
from federation.scheduling.preemption import find_preemption
from federation.scheduling.state import State

from .builders import advance, snapshot
from .test_invariants import SETTINGS, fleets, job_lists, queue_sets

COMPARE_ALL = SchedulerConfig(preemption_compare=0)


@st.composite
def checkpointed(draw: st.DrawFn, jobs: list[Job]) -> list[Job]:
    """`jobs`, preemptible, with random run times so far and checkpoints (interval, last
    report, none)."""
    return [
        replace(
            j,
            preemptible=True,
            runtime_s=draw(st.sampled_from([0.0, 60.0, 1000.0, 7200.0])),
            checkpoint_interval_s=draw(st.sampled_from([None, 600.0, 1800.0])),
            since_checkpoint_s=draw(st.sampled_from([None, 0.0, 30.0, 5000.0])),
        )
        for j in jobs
    ]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Snapshot, Job]:
    """Running jobs with checkpoints (placed by the core) and the job that wants to preempt."""
    empty = snapshot(draw(fleets()), draw(queue_sets()))
    running = draw(checkpointed(draw(job_lists("r", 10, top_priority=3))))
    first = schedule(empty, running, now=0)
    wanted = draw(job_lists("p", 1, top_priority=0))[0]
    return advance(empty, first), replace(wanted, priority=9, preemptible=False)


@SETTINGS
@given(scenarios())
def test_the_chosen_victims_lose_no_more_work_than_any_set_offered(
    scenario: tuple[Snapshot, Job],
) -> None:
    snap, job = scenario
    state = State(snap)
    ctx = JobContext(job, state, COMPARE_ALL, assignments(job, COMPARE_ALL))
    fits = FlavorAssigner(DEFAULT_REGISTRY.profile(COMPARE_ALL))
    clusters = list(state.clusters.values())
    chosen = find_preemption(ctx, clusters, fits)
    if chosen is None:
        return
    top, lost, count, _, _ = chosen.cost
    assert lost == sum(v.lost_work for v in chosen.victims)
    assert top == max(v.job.priority for v in chosen.victims) and count == len(chosen.victims)
    for cluster in clusters:  # each cluster's own offer: never cheaper at the same priority
        offer = find_preemption(ctx, [cluster], fits)
        if offer is not None:
            assert chosen.cost[:2] <= offer.cost[:2], (chosen.reason, offer.reason)
