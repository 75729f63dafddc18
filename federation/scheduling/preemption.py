"""Victim search: when a job fits nowhere, which running jobs to evict, and where.

Candidates are whole placed jobs (gangs leave whole) that are preemptible and of lower
priority than the preemptor, or of equal priority in another queue of the cohort that is
borrowing quota the preemptor's queue is entitled to (Kueue's reclaimWithinCohort). Per cluster
the search first checks that evicting every candidate would let the job fit (never evict for
a job that would still not fit), then removes candidates cheapest first until it fits, then
puts back those not needed, most expensive first. Across clusters the cheapest victim set
wins: lowest top victim priority, then fewest victims, then least run time lost.

Every dry run happens in a `State.trial()`, so the state is unchanged after each search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from federation.scheduling.flavors import FitCheck, Verdict
from federation.scheduling.framework import JobContext
from federation.scheduling.model import Placement
from federation.scheduling.quota import QuotaLedger
from federation.scheduling.state import ClusterState

Cost = tuple[int, int, float, int]  # top victim priority, victims, run time lost, cluster order


@dataclass(frozen=True, slots=True)
class Preemption:
    """A victim set in one cluster and how the preemptor would fit once they are gone."""

    cluster: str
    victims: tuple[Placement, ...]
    verdict: Verdict
    cost: Cost

    @property
    def reason(self) -> str:
        """Why these victims, in numbers."""
        top, count, lost, _ = self.cost
        return (
            f"{self.cluster}: evicting {count} job(s) of priority <= {top} "
            f"({lost:.0f}s run time lost) lets the job fit"
        )


def find_preemption(
    ctx: JobContext, clusters: Sequence[ClusterState], fits: FitCheck
) -> Preemption | None:
    """The cheapest victim set over `clusters`, or None if evicting cannot make the job fit."""
    best: Preemption | None = None
    for cluster in clusters:
        found = _search(ctx, cluster, fits)
        if found is not None and (best is None or found.cost < best.cost):
            best = found
    return best


def candidates(ctx: JobContext, cluster: ClusterState) -> list[Placement]:
    """Placed jobs the preemptor may evict to fit `cluster`, cheapest first.

    Jobs in other clusters count only when the preemptor's quota is what blocks it and they
    use the same queue or cohort (evicting them frees quota, not capacity here).
    """
    job, state = ctx.job, ctx.state
    ledger = state.quota
    preferred = ctx.demand(ctx.assignments[0])
    quota_blocked = not ledger.check(job.queue, preferred).ok
    near = dict(state.by_cluster.get(cluster.name, {}))
    if quota_blocked:
        for queue, placements in state.by_queue.items():
            if _same_quota(ledger, job.queue, queue):
                near.update(placements)
    pool = []
    for placement in near.values():
        victim = placement.job
        if not victim.preemptible or victim.id in state.preempting or victim.id == job.id:
            continue
        if victim.priority < job.priority or (
            victim.priority == job.priority and _reclaims(ctx, victim.queue)
        ):
            pool.append(placement)
    pool.sort(key=lambda p: (p.job.priority, p.job.runtime_s, p.job.id))
    return pool


def _same_quota(ledger: QuotaLedger, queue: str, other: str) -> bool:
    if queue == other:
        return True
    cohort = ledger.queues[queue].cohort
    other_queue = ledger.queues.get(other)
    return bool(cohort) and other_queue is not None and other_queue.cohort == cohort


def _reclaims(ctx: JobContext, victim_queue: str) -> bool:
    """Whether the preemptor's queue may take back quota `victim_queue` borrowed from it."""
    ledger, queue = ctx.state.quota, ctx.job.queue
    if victim_queue == queue or not _same_quota(ledger, queue, victim_queue):
        return False
    wanted = ctx.demand(ctx.assignments[0])
    return ledger.within_nominal(queue, wanted) and any(
        ledger.borrows(victim_queue, resource) for resource in wanted
    )


def _search(ctx: JobContext, cluster: ClusterState, fits: FitCheck) -> Preemption | None:
    pool = candidates(ctx, cluster)
    if not pool or not _fits_without(ctx, cluster, fits, pool):
        return None
    state = ctx.state
    removed: list[Placement] = []
    with state.trial():
        for victim in pool:
            state.evict(victim)
            removed.append(victim)
            if fits(ctx, cluster).status.ok:
                break
    needed = removed
    for victim in reversed(removed):
        fewer = [v for v in needed if v is not victim]
        if _fits_without(ctx, cluster, fits, fewer):
            needed = fewer
    if not needed:
        return None
    with state.trial():
        for victim in needed:
            state.evict(victim)
        verdict = fits(ctx, cluster)
    cost = (
        max(v.job.priority for v in needed),
        len(needed),
        sum(v.job.runtime_s for v in needed),
        cluster.order,
    )
    return Preemption(cluster.name, tuple(needed), verdict, cost)


def _fits_without(
    ctx: JobContext, cluster: ClusterState, fits: FitCheck, victims: Sequence[Placement]
) -> bool:
    """Whether the job fits `cluster` once `victims` are gone (a dry run)."""
    with ctx.state.trial():
        for victim in victims:
            ctx.state.evict(victim)
        return fits(ctx, cluster).status.ok
