"""Victim search: when a job fits nowhere, which running jobs to evict, and where.

Candidates are whole jobs placed before this cycle (gangs leave whole), preemptible, not counted
on by a reservation of this cycle (`backfill.py`), of lower priority than the preemptor, or of
equal priority in another queue of the cohort that is borrowing quota the preemptor's queue is
entitled to (Kueue's reclaimWithinCohort), and that free something the preemptor needs.

Per cluster: a bound from summaries (free devices plus the devices candidates hold, per node)
rules out clusters where even evicting every candidate could not help. Otherwise candidates
are evicted node by node, cheapest node first, skipping nodes where clearing them would not
make room for any replica, until the job fits (if it never does, nothing is evicted: never
evict for a job that would still not fit); then each victim is put back, most expensive
first, if the job still fits without evicting it. Across clusters the cheapest victim set
wins: lowest top victim priority, then least work lost (device-seconds since each victim's
last checkpoint, `Placement.lost_work`), then fewest victims.

Every dry run happens in a `State.trial()`, so the state is unchanged after each search. A
cluster without candidates, or whose search found nothing, is remembered for the rest of the
cycle for jobs of the same shape and priority: what they could evict only shrinks (placements
of this cycle are no victims in it, victims leave).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from federation.scheduling.decisions import Resized
from federation.scheduling.devices import WHOLE
from federation.scheduling.elastic import at_floor, given_back, one_back, surplus_devices
from federation.scheduling.flavors import FitCheck, Verdict
from federation.scheduling.framework import JobContext
from federation.scheduling.model import Placement, ReplicaPlacement
from federation.scheduling.quota import QuotaLedger
from federation.scheduling.room import Room
from federation.scheduling.state import ClusterState, Usage

# top evicted priority (NO_EVICTION: none), work lost, victims, devices elastic jobs give back,
# cluster order: any set that only shrinks elastic jobs costs less than one that evicts
Cost = tuple[float, float, int, float, int]
NO_EVICTION = -math.inf


@dataclass(frozen=True, slots=True)
class Preemption:
    """A victim set in one cluster and how the preemptor would fit once they are gone."""

    cluster: str
    victims: tuple[Placement, ...]
    verdict: Verdict
    cost: Cost
    shrunk: tuple[Resized, ...] = ()

    @property
    def reason(self) -> str:
        """Why these victims and shrinks, in numbers."""
        top, lost, count, back, _ = self.cost
        parts = []
        if self.shrunk:
            parts.append(
                f"shrinking {len(self.shrunk)} elastic job(s) towards their minimum "
                f"({back:g} device(s) given back)"
            )
        if count:
            parts.append(
                f"evicting {count} job(s) of priority <= {top:g} ({lost:.0f} device-seconds "
                "of work lost since their checkpoints)"
            )
        return f"{self.cluster}: {' and '.join(parts)} lets the job fit"


@dataclass(frozen=True, slots=True)
class Scope:
    """What a preemptor may take, worked out once per job."""

    quota_blocked: bool  # its own queue's quota stops it (victims elsewhere may help)
    reclaimable: frozenset[str]  # queues it may reclaim from at equal priority
    flavors: frozenset[str]  # flavors it may run on
    any_node: bool  # it has a task without accelerators (any node capacity helps)


def find_preemption(
    ctx: JobContext, clusters: Sequence[ClusterState], fits: FitCheck
) -> Preemption | None:
    """The cheapest victim set over `clusters`, or None if evicting cannot make the job fit.

    Clusters are searched in order of a lower bound on their cost (their cheapest candidate);
    the search stops when no remaining cluster can beat the best set, or once
    `config.preemption_compare` clusters offered a set (0: compare all).
    """
    state, job = ctx.state, ctx.job
    scope = _scope(ctx)
    remember = job.id not in state.held  # a job's own hold makes its search unlike others'
    searchable = []
    for cluster in clusters:
        key: Hashable = (
            "no victims",
            cluster.name,
            ctx.shape,
            tuple(ctx.key(a) for a in ctx.assignments),
            job.priority,
            scope.reclaimable,
            job.queue if scope.quota_blocked else "",
        )
        if remember and key in state.memo:
            continue
        pool = _candidate_groups(ctx, cluster, scope)
        shrinkable = _shrinkable(ctx, cluster, scope)
        if pool.groups or shrinkable:
            bound = (NO_EVICTION, 0.0, 0, 0.0) if shrinkable else (*pool.bound, 0.0)
            searchable.append(((*bound, cluster.order), cluster, pool, shrinkable, key))
        elif remember:  # candidates only leave during a cycle: none now is none for the rest
            state.memo[key] = None
    searchable.sort(key=lambda entry: entry[0])
    best: Preemption | None = None
    offers = 0
    limit = ctx.config.preemption_compare
    for bound, cluster, pool, shrinkable, key in searchable:
        if best is not None and bound >= best.cost:
            break
        found = _search(ctx, cluster, fits, pool, shrinkable)
        if found is None:
            if remember:
                state.memo[key] = None
            continue
        offers += 1
        if best is None or found.cost < best.cost:
            best = found
        if limit and offers >= limit:
            break
    return best


def _scope(ctx: JobContext) -> Scope:
    ledger = ctx.state.quota
    return Scope(
        quota_blocked=not ledger.check(ctx.job.queue, ctx.demand(ctx.assignments[0])).ok,
        reclaimable=frozenset(q for q in ledger.queues if _reclaims(ctx, q)),
        flavors=frozenset(o.flavor for a in ctx.assignments for o in a if o is not None),
        any_node=any(o is None for a in ctx.assignments for o in a),
    )


def candidates(ctx: JobContext, cluster: ClusterState, scope: Scope) -> list[Placement]:
    """Placed jobs the preemptor may evict to fit `cluster`, cheapest first.

    Only jobs that free something the preemptor needs count: a flavor it may run on (or any
    node capacity when it has a task without accelerators) in `cluster`, or, when its quota is
    what blocks it, quota of its queue or cohort anywhere.
    """
    job, state = ctx.job, ctx.state
    if not scope.reclaimable and not (
        scope.quota_blocked or state.any_preemptible_below(cluster.name, job.priority)
    ):
        return []
    if scope.any_node:
        near = list(state.by_cluster.get(cluster.name, {}).values())
    else:
        here: dict[str, Placement] = {}
        for flavor in sorted(scope.flavors):
            here.update(state.by_flavor.get((cluster.name, flavor), {}))
        near = list(here.values())
    if scope.quota_blocked:
        for queue, placements in state.by_queue.items():
            if _same_quota(state.quota, job.queue, queue):
                near.extend(p for p in placements.values() if p.cluster != cluster.name)
    pool = [
        p
        for p in near
        if p.job.preemptible
        and p.job.id not in state.preempting
        and p.job.id not in state.pinned
        and p.job.id not in state.fresh
        and p.job.id != job.id
        and (
            p.job.priority < job.priority
            or (p.job.priority == job.priority and p.job.queue in scope.reclaimable)
        )
    ]
    pool.sort(key=_victim_cost)
    return pool


def _shrinkable(ctx: JobContext, cluster: ClusterState, scope: Scope) -> list[Placement]:
    """Elastic jobs that may give back replicas above their minimum for the preemptor,
    cheapest first: of its priority or lower (their surplus grew into capacity nobody of
    that priority waited for; preemptible or not, the minimum stays), freeing a flavor it may
    use in `cluster` or quota it needs."""
    job, state = ctx.job, ctx.state
    found = [
        p
        for p in state.elastic.values()
        if p.job.priority <= job.priority
        and p.job.id != job.id
        and p.job.id not in state.preempting
        and p.job.id not in state.pinned
        and p.job.id not in state.fresh
        and any(t.replicas > t.floor for t in p.job.tasks)
        and (
            (
                p.cluster == cluster.name
                and (scope.any_node or any(f in scope.flavors for f in p.flavors))
            )
            or (scope.quota_blocked and _same_quota(state.quota, job.queue, p.job.queue))
        )
    ]
    found.sort(key=lambda p: (p.job.priority, surplus_devices(p), p.job.id))
    return found


def _victim_cost(p: Placement) -> tuple[int, float, str]:
    return (p.job.priority, p.lost_work, p.job.id)


def _same_quota(ledger: QuotaLedger, queue: str, other: str) -> bool:
    return ledger.pool(queue) == ledger.pool(other)


def _reclaims(ctx: JobContext, victim_queue: str) -> bool:
    """Whether the preemptor's queue may take back quota `victim_queue` borrowed from it."""
    ledger, queue = ctx.state.quota, ctx.job.queue
    if victim_queue == queue or not _same_quota(ledger, queue, victim_queue):
        return False
    wanted = ctx.demand(ctx.assignments[0])
    return ledger.within_nominal(queue, wanted) and any(
        ledger.borrows(victim_queue, resource) for resource in wanted
    )


@dataclass(frozen=True, slots=True)
class _Pool:
    """A cluster's candidates for jobs alike, grouped by node, with a lower bound on the cost
    of any victim set from them: (lowest priority, least work lost at it, 1 victim)."""

    key: Hashable
    groups: list[_Group]
    bound: tuple[int, float, int]


def _candidate_groups(ctx: JobContext, cluster: ClusterState, scope: Scope) -> _Pool:
    """The cluster's candidates, cached per request scope and the versions of the flavors
    involved (victims marked preempting since are skipped by `_search`)."""
    state = ctx.state
    flavors = sorted(scope.flavors | ({""} if scope.any_node else set()))
    key = (
        "victims",
        scope,
        ctx.job.priority,
        state.quota.version if scope.quota_blocked else 0,
        cluster.versions_of(flavors),
    )
    pool: _Pool | None = cluster.fit_cache.get(key)
    if pool is None:
        victims = candidates(ctx, cluster, scope)
        bound = (0, 0.0, 1)
        if victims:  # candidates come cheapest first: the first one loses least at its priority
            bound = (victims[0].job.priority, victims[0].lost_work, 1)
        pool = cluster.fit_cache[key] = _Pool(key, _node_groups(cluster, victims), bound)
    return pool


def _search(
    ctx: JobContext,
    cluster: ClusterState,
    fits: FitCheck,
    pool: _Pool,
    shrinkable: list[Placement],
) -> Preemption | None:
    """The cheapest way to make the job fit `cluster`: shrink elastic jobs to their minimum
    first, evict candidates node by node only if that is not enough; then put back each victim
    and each replica given back, most expensive first, that the job can do without. None when
    nothing makes it fit."""
    state = ctx.state
    shrinks = tuple((p.job.id, tuple(t.replicas for t in p.job.tasks)) for p in shrinkable)
    bound = ("could fit", pool.key, shrinks, ctx.shape, tuple(ctx.key(a) for a in ctx.assignments))
    could: bool | None = cluster.fit_cache.get(bound)
    if could is None:
        could = cluster.fit_cache[bound] = _could_fit(ctx, cluster, pool.groups, shrinkable)
    if not could:
        return None
    with state.trial():
        for original in shrinkable:
            state.resize(original, at_floor(original))
        fitted = bool(shrinkable) and fits(ctx, cluster).status.ok
        freed: list[tuple[Placement, list[Usage]]] = []
        for group in () if fitted else pool.groups:
            victims = [
                state.placements[v.job.id]  # as it is now: it may have been shrunk
                for v in group.victims
                if v.job.id not in state.preempting and v.job.id not in state.pinned
            ]
            if not victims or not _frees_a_replica(ctx, cluster, group):
                continue
            freed.extend((victim, state.evict(victim)) for victim in victims)
            if fits(ctx, cluster).status.ok:
                fitted = True
                break
        if not fitted:
            return None
        needed: list[Placement] = []
        for victim, given in reversed(freed):
            with state.trial() as back:
                state.restore(victim, given)
                if fits(ctx, cluster).status.ok:
                    back.keep()
                    continue
            needed.append(victim)
        evicted = {v.job.id for v in needed}
        kept = [p for p in shrinkable if p.job.id not in evicted]
        for original in reversed(kept):
            _give_back_unneeded(ctx, cluster, fits, original)
        verdict = fits(ctx, cluster)
        reason = f"gave back replicas for job {ctx.job.id} (priority {ctx.job.priority})"
        resized = tuple(
            r for r in (Resized(p, state.placements[p.job.id], reason) for p in kept) if r.counts
        )
    if not needed and not resized:
        return None
    originals = {p.job.id: p for p in shrinkable}
    chosen = tuple(originals.get(v.job.id, v) for v in reversed(needed))
    cost = (
        max((v.job.priority for v in chosen), default=NO_EVICTION),
        sum(v.lost_work for v in chosen),
        len(chosen),
        sum(given_back(r.before, r.placement) for r in resized),
        cluster.order,
    )
    return Preemption(cluster.name, chosen, verdict, cost, resized)


def _give_back_unneeded(
    ctx: JobContext, cluster: ClusterState, fits: FitCheck, original: Placement
) -> None:
    """Give a shrunk job its replicas back, one at a time, while the preemptor still fits."""
    state = ctx.state
    while True:
        current = state.placements[original.job.id]
        bigger = one_back(current, original)
        if bigger is None:
            return
        with state.trial() as back:
            state.resize(current, bigger)
            if fits(ctx, cluster).status.ok:
                back.keep()
                continue
        return


@dataclass(slots=True)
class _Group:
    """Candidates evicted together: those whose first replica here is on `node` (None: a job
    in another cluster or without known replicas), with the devices they hold on that node."""

    node: int | None
    victims: list[Placement]
    held: dict[str, int]  # flavor -> devices the victims hold on `node`

    def cost(self) -> tuple[int, float, int, str]:
        victims = self.victims
        return (
            max(p.job.priority for p in victims),
            sum(p.lost_work for p in victims),
            len(victims),
            victims[0].job.id,
        )


def _node_groups(cluster: ClusterState, pool: list[Placement]) -> list[_Group]:
    """Candidates grouped by node, cheapest group first."""
    groups: dict[int | str, _Group] = {}
    for p in pool:
        node = cluster.node_index.get(p.replicas[0].node) if p.replicas else None
        if p.cluster != cluster.name or node is None:
            groups[p.job.id] = _Group(None, [p], {})
            continue
        group = groups.get(node)
        if group is None:
            group = groups[node] = _Group(node, [], {})
        group.victims.append(p)
        for replica in p.replicas:
            flavor = p.flavors[replica.task]
            if flavor and cluster.node_index.get(replica.node) == node:
                group.held[flavor] = group.held.get(flavor, 0) + max(len(replica.devices), 1)
    return sorted(groups.values(), key=_Group.cost)


def _frees_a_replica(ctx: JobContext, cluster: ClusterState, group: _Group) -> bool:
    """Whether evicting the group would make room on its node for a replica of some task,
    first by counting devices, then on a scratch copy of the node (groups without a node
    only free quota and always count)."""
    if group.node is None:
        return True
    node = cluster.nodes[group.node]
    options = [
        (task, option)
        for assignment in ctx.assignments
        for task, option in zip(ctx.job.tasks, assignment, strict=True)
        if node.tolerates(ctx.tolerations(option))
        and (
            option is None
            or option.milli < WHOLE
            or (
                option.flavor in node.devices
                and node.devices[option.flavor].free_count() + group.held.get(option.flavor, 0)
                >= option.count
            )
        )
    ]
    if not options:
        return False
    room = Room.of(node)
    for victim in group.victims:
        for usage in cluster.usages(victim):
            if usage.node == group.node:
                room.free(usage)
    prefer = ctx.config.device_preference
    return any(room.copy().fill(task, option, 1, prefer) for task, option in options)


def _could_fit(
    ctx: JobContext, cluster: ClusterState, groups: list[_Group], shrinkable: list[Placement]
) -> bool:
    """A necessary condition from summaries: for some assignment, every task's replicas could
    fit if each node gave its free devices plus every device candidates hold on it and every
    device elastic jobs hold above their minimum."""
    held: dict[str, dict[int, int]] = {}  # flavor -> node -> devices candidates hold there
    freeable: Iterable[tuple[Placement, Iterable[ReplicaPlacement]]] = [
        *((v, v.replicas) for g in groups for v in g.victims),
        *((p, p.beyond(at_floor(p))) for p in shrinkable),
    ]
    for placement, replicas in freeable:
        if placement.cluster != cluster.name:
            continue
        for replica in replicas:
            node = cluster.node_index.get(replica.node)
            flavor = placement.flavors[replica.task]
            if node is not None and flavor:
                per_node = held.setdefault(flavor, {})
                per_node[node] = per_node.get(node, 0) + max(len(replica.devices), 1)
    capacity: dict[tuple[str, int], int] = {}

    def replicas_possible(flavor: str, count: int) -> int:
        found = capacity.get((flavor, count))
        if found is None:
            index = cluster.flavors.get(flavor)
            extra = held.get(flavor, {})
            found = 0
            if index is not None:
                for free, nodes in enumerate(index.buckets):
                    found += sum((free + extra.get(n, 0)) // count for n in nodes)
            capacity[(flavor, count)] = found
        return found

    gang = ctx.job.gang
    return any(
        all(
            option is None
            or option.milli < WHOLE
            or replicas_possible(option.flavor, option.count) >= (task.replicas if gang else 1)
            for task, option in zip(ctx.job.tasks, assignment, strict=True)
        )
        for assignment in ctx.assignments
    )
