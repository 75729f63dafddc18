"""Elastic jobs: what a placed job may give back, and growth into capacity nothing waits for.

An elastic task (`Task.elastic`) starts as a gang of its `min` replicas and may hold up to
`max`. After a cycle has decided every pending job, placed elastic jobs grow one replica at a
time, the highest priority first and, among equals, the queue with the lowest dominant share
(so growth shares idle capacity fairly), through the same filters a placement passes (quota,
device fit against free capacity minus reservations). A job does not grow on a cluster where a
pending job of equal or higher priority is stopped by capacity, or anywhere its queue's quota
pool stops one, when what the waiting job asks for could be what the growth takes (an
accelerator flavor of both; CPU and memory, which every replica takes, when either has a task
without accelerators or the pool governs CPU, memory or compute): that capacity is the waiting
job's. What a job holds above its `min` is what preemption takes first (`preemption.py`):
giving back replicas costs less than any eviction. A job holding more than its `max` (a
service's shard whose cap was lowered, `controllers/services.py`) is scaled in to it at the
start of the cycle, so what it gives back is free for the cycle's decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from federation.scheduling.decisions import Resized
from federation.scheduling.flavors import FitCheck
from federation.scheduling.framework import JobContext, SchedulerConfig
from federation.scheduling.model import Job, Placement, ReplicaPlacement
from federation.scheduling.state import State

GROWN = "grew into capacity no job of equal or higher priority waits for"
SCALED_IN = "scaled in to the most replicas it may hold now"
# what a job asks of the fleet, for growth's blocking test: its accelerator flavors, or None
# for "anything" (a task without accelerators competes for the CPU and memory all replicas take)
Asks = frozenset[str] | None


def _flavors(options: Iterable[Iterable[str] | None]) -> Asks:
    """The union of each task's flavors; None when a task takes no accelerator."""
    flavors: set[str] = set()
    for task in options:
        if task is None:
            return None
        flavors.update(task)
    return frozenset(flavors)


def asks(job: Job) -> Asks:
    """The accelerator flavors `job` could use; None when a task of it takes none."""
    return _flavors(
        None if t.accelerators is None else (o.flavor for o in t.accelerators.options)
        for t in job.tasks
    )


def holds(placement: Placement) -> Asks:
    """The accelerator flavors `placement` runs on; None when a task of it takes none."""
    options = (placement.option(t) for t in range(len(placement.job.tasks)))
    return _flavors(None if o is None else (o.flavor,) for o in options)


def compete(waiting: Asks, growing: Asks) -> bool:
    """Whether growth on `growing`'s flavors could take what a job asking `waiting` needs."""
    return waiting is None or growing is None or bool(waiting & growing)


def at_floor(placement: Placement) -> Placement:
    """The placement with every task at its fewest replicas (highest indices leave first)."""
    for t, task in enumerate(placement.job.tasks):
        if task.replicas > task.floor:
            placement = placement.resized(t, task.floor)
    return placement


def surplus_devices(placement: Placement) -> float:
    """Devices (shares count their part; pods when it holds none) held above the floor."""
    devices = pods = 0.0
    for t, task in enumerate(placement.job.tasks):
        extra = task.replicas - task.floor
        pods += extra
        devices += extra * placement.devices_per_replica(t)
    return devices or pods


def given_back(before: Placement, after: Placement) -> float:
    """Devices (or pods) a shrink from `before` to `after` gives back."""
    return surplus_devices(before) - surplus_devices(after)


def one_back(current: Placement, original: Placement) -> Placement | None:
    """`current` with one replica more towards `original`'s counts (the last task first, the
    replica back where it was), or None when it holds them all again."""
    for t in reversed(range(len(original.job.tasks))):
        held = current.job.tasks[t].replicas
        if held < original.job.tasks[t].replicas:
            back = original.replica(t, held)
            return current.resized(t, held + 1, (back,) if back is not None else ())
    return None


def scale_in(state: State) -> list[Resized]:
    """Shrink every placed elastic job holding more replicas than a task's ceiling to it
    (highest indices leave first); jobs being evicted are left alone."""
    out = []
    for job_id in sorted(state.elastic):
        before = state.elastic[job_id]
        if job_id in state.preempting:
            continue
        after = before
        for t, task in enumerate(before.job.tasks):
            if task.replicas > task.ceiling:
                after = after.resized(t, task.ceiling)
        if after is not before:
            state.resize(before, after)
            out.append(Resized(before, after, SCALED_IN))
    return out


def grow(
    state: State,
    config: SchedulerConfig,
    fits: FitCheck,
    blocked: Callable[[Placement], bool],
    exclude: frozenset[str],
) -> list[Resized]:
    """Grow placed elastic jobs into free capacity, one replica at a time (see the module)."""
    growing = {
        job_id: p
        for job_id, p in state.elastic.items()
        if job_id not in state.preempting
        and job_id not in state.fresh
        and job_id not in exclude
        and any(t.replicas < t.ceiling for t in p.job.tasks)
        and not blocked(p)
    }
    before = dict(growing)
    ledger = state.quota
    while growing:
        job_id = min(
            growing,
            key=lambda j: (
                -growing[j].job.priority,
                ledger.dominant_share(growing[j].job.queue),
                growing[j].job.created_at,
                j,
            ),
        )
        bigger = _one_more(state, config, fits, growing[job_id])
        if bigger is None:
            del growing[job_id]
            continue
        state.resize(growing[job_id], bigger)
        growing[job_id] = bigger
    return [
        Resized(before[job_id], state.placements[job_id], GROWN)
        for job_id in sorted(before)
        if state.placements[job_id] is not before[job_id]
    ]


def _one_more(
    state: State, config: SchedulerConfig, fits: FitCheck, placement: Placement
) -> Placement | None:
    """The placement with one more replica of its first task that can take one, or None."""
    job, cluster = placement.job, state.clusters.get(placement.cluster)
    if cluster is None:
        return None
    for t, task in enumerate(job.tasks):
        if task.replicas >= task.ceiling:
            continue
        one = Job(
            id=job.id,
            queue=job.queue,
            tasks=(replace(task, replicas=1, elastic=None),),
            priority=job.priority,
            created_at=job.created_at,
            constraints=job.constraints,
        )
        verdict = fits(JobContext(one, state, config, [(placement.option(t),)]), cluster)
        if not verdict.status.ok:
            continue
        estimate = verdict.estimate
        added = tuple(
            ReplicaPlacement(t, r.node, r.devices)
            for r in (estimate.replicas if estimate is not None else ())
        )
        return placement.resized(t, task.replicas + 1, added)
    return None
