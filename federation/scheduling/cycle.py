"""One scheduling cycle: `schedule(snapshot, pending, now=..., config=...) -> CycleResult`.

Pure and deterministic: the same snapshot, pending jobs, `now` and config give the same
result. The hub, the simulator and the benchmarks all call this function.

For each pending job in `ordering` order: run the filters on every cluster (through the flavor
assigner), score the clusters that pass and place the job on the best one (the state then
holds it, so later jobs see the capacity taken). A job that fits nowhere is rejected when every
cluster answers unresolvable, may preempt when preemption is enabled, or stays pending with
the reason of each cluster (elastic jobs above their ceiling are scaled in first, elastic
jobs grow last: `elastic.py`); a large gang that stays pending may get a reservation that later
jobs backfill around (`backfill.py`). Jobs the last cycle parked are not tried again while
nothing they could use appeared (`parking.py`): they stay pending with their last reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from federation.scheduling.backfill import Backfill
from federation.scheduling.decisions import (
    CycleResult,
    Pending,
    Placed,
    Preempted,
    Rejected,
    Reserved,
    unresolvable_everywhere,
)
from federation.scheduling.elastic import Asks, asks, compete, grow, holds, scale_in
from federation.scheduling.flavors import FlavorAssigner, Verdict, assignments
from federation.scheduling.framework import Candidate, JobContext, Registry, SchedulerConfig
from federation.scheduling.model import COMPUTE, CPU, MEMORY, Job, Placement, Snapshot
from federation.scheduling.ordering import PendingOrder
from federation.scheduling.parking import Parked, park
from federation.scheduling.plugins import DEFAULT_REGISTRY
from federation.scheduling.preemption import find_preemption
from federation.scheduling.state import ClusterState, State
from federation.scheduling.status import Code, Status, unresolvable

DEFAULT_CONFIG = SchedulerConfig()
FLEET = "*"  # key of a reason that concerns the job itself, not one cluster


def schedule(
    snapshot: Snapshot,
    pending: Sequence[Job],
    *,
    now: float,
    config: SchedulerConfig = DEFAULT_CONFIG,
    registry: Registry = DEFAULT_REGISTRY,
    parked: Parked | None = None,
) -> CycleResult:
    """Decide, for every pending job, place / preempt / leave pending / reject, with reasons.

    `now` (seconds, injected) feeds priority aging (`config.priority_aging_s`) and the
    expected ends of running jobs (reservations, `backfill.py`); the core reads no clock. The
    snapshot is never modified. `parked`: the last cycle's `CycleResult.parked`, whose jobs
    are not tried again while nothing they could use appeared (the same decisions, sooner).
    """
    return _Cycle(snapshot, config, registry, now).run(pending, parked)


class _Cycle:
    def __init__(
        self, snapshot: Snapshot, config: SchedulerConfig, registry: Registry, now: float
    ) -> None:
        self.config = config
        self.now = now
        self.state = State(snapshot)
        self.profile = registry.profile(config)
        self.fits = FlavorAssigner(self.profile)
        self.cluster_filters = {f.name for f in self.profile.cluster_filters}
        self.placed: list[Placed] = []
        self.preempted: list[Preempted] = []
        self.pending: list[Pending] = []
        self.rejected: list[Rejected] = []
        self.backfill = Backfill(self.state, config, now, self.preempted)
        self.reserved: list[Reserved] = []
        self.changes = 0  # placements, preemptions and reservations made so far
        # per priority, the queues placed at it in this cycle and whether an elastic job was
        self.placed_at: dict[int, tuple[set[str], bool]] = {}

    def run(self, jobs: Sequence[Job], parked: Parked | None) -> CycleResult:
        ledger = self.state.quota
        order = PendingOrder(
            jobs,
            share=lambda q: ledger.dominant_share(q) if q in ledger.queues else 0.0,
            priority=self._aged_priority,
        )
        scaled_in = scale_in(self.state)
        skippable = parked.skippable(self.state, self.config) if parked is not None else {}
        turns: dict[str, int] = {}  # pending job -> changes made by its turn, if it may park
        for job in order:
            kept = skippable.get(job.id)
            if kept is not None and kept.job == job:
                self.pending.append(Pending(job, kept.reasons))  # nothing it could use came
            else:
                self._decide(job)
            if self._no_victims_placed(job):
                turns[job.id] = self.changes
        shrunk = frozenset(r.before.job.id for p in self.preempted for r in p.shrunk)
        grown = grow(self.state, self.config, self.fits, self._waited_for(), shrunk)
        final = self.changes + len(grown)
        settled = [p for p in self.pending if turns.get(p.job.id) == final]
        if not final:  # parked jobs outside this cycle's window stay parked in a calm cycle
            ids = {job.id for job in jobs}
            settled += [p for job_id, p in skippable.items() if job_id not in ids]
        return CycleResult(
            tuple(self.placed),
            tuple(self.preempted),
            tuple(self.pending),
            tuple(self.rejected),
            tuple(self.reserved),
            tuple(grown),
            tuple(scaled_in),
            park(self.state, self.config, settled),
        )

    def _waited_for(self) -> Callable[[Placement], bool]:
        """Whether a job of equal or higher priority than an elastic job waits for what it
        would grow into: capacity on its cluster, or its quota pool anywhere (see `elastic`).
        What waits is gathered at the first question (a cycle without elastic jobs asks none)."""
        ledger = self.state.quota
        capacity: dict[str, list[tuple[float, Asks]]] = {}  # cluster -> who capacity stops
        quota: dict[tuple[str, str], list[tuple[float, Asks]]] = {}  # pool -> who it stops
        gathered = False

        def gather() -> None:
            for pending in self.pending:
                job = pending.job
                for cluster, status in pending.reasons.items():
                    if (
                        status.code is not Code.UNSCHEDULABLE
                        or status.plugin in self.cluster_filters
                    ):
                        continue
                    if status.plugin == "quota":
                        governed = ledger.queues[job.queue].quota.keys() & {CPU, MEMORY, COMPUTE}
                        wanted = None if governed else asks(job)
                        quota.setdefault(ledger.pool(job.queue), []).append((job.priority, wanted))
                    else:
                        capacity.setdefault(cluster, []).append((job.priority, asks(job)))
            for preempted in self.preempted:
                preemptor = preempted.preemptor
                capacity.setdefault(preempted.reservation.cluster, []).append(
                    (preemptor.priority, asks(preemptor))
                )

        def waited_for(placement: Placement) -> bool:
            nonlocal gathered
            if not gathered:
                gather()
                gathered = True
            job, held = placement.job, holds(placement)
            waiting = capacity.get(placement.cluster, []) + quota.get(ledger.pool(job.queue), [])
            return any(job.priority <= p and compete(wanted, held) for p, wanted in waiting)

        return waited_for

    def _aged_priority(self, job: Job) -> int:
        aging = self.config.priority_aging_s
        if aging <= 0:
            return job.priority
        return job.priority + int(max(self.now - job.created_at, 0.0) // aging)

    def _decide(self, job: Job) -> None:
        problem = self._invalid(job)
        if problem:
            self.rejected.append(Rejected(job, {FLEET: unresolvable(problem)}))
            return
        state = self.state
        ctx = JobContext(job, state, self.config, assignments(job, self.config))
        with state.trial() as trial:
            state.unhold(job.id)  # capacity held for this job is free for it
            verdicts = self._fit(ctx)
            if verdicts is None:
                trial.keep()
                return
            reasons = {name: v.status for name, v in verdicts.items()}
            if unresolvable_everywhere(reasons):
                self.rejected.append(Rejected(job, reasons))
                return
            helpable = [state.clusters[n] for n, v in verdicts.items() if self._helps(v)]
            preemption = None
            # a preemptor whose victims (or the replicas it shrank) have not left yet waits
            # for them rather than preempting again (kube-scheduler's nominated-node rule):
            # while they are still reported, what it was promised looks taken
            if self.config.preemption and job.id not in state.awaiting:
                preemption = find_preemption(ctx, helpable, self.fits)
        if preemption is None or preemption.verdict.assignment is None:
            self._wait(ctx, reasons, helpable)
            return
        self.changes += 1
        for victim in preemption.victims:
            state.mark_preempting(victim.job.id)
        estimate = preemption.verdict.estimate
        reservation = Placement.of(
            job,
            preemption.cluster,
            preemption.verdict.assignment,
            estimate.replicas if estimate is not None else (),
        )
        if preemption.shrunk:  # what they give back is the preemptor's from now on
            for resized in preemption.shrunk:
                state.resize(resized.before, resized.placement)
            state.hold(reservation)
        self.preempted.append(
            Preempted(job, preemption.victims, reservation, preemption.reason, preemption.shrunk)
        )

    def _fit(self, ctx: JobContext) -> dict[str, Verdict] | None:
        """Place the job on the best cluster it fits (None), else every cluster's verdict. A
        job that ends in time may use what reservations starting after it hold."""
        state, backfill = self.state, self.backfill
        passable = backfill.passable(ctx.job)
        if not passable:
            return self._fit_now(ctx)
        with state.trial() as trial:
            before = backfill.release(passable)
            verdicts = self._fit_now(ctx)
            if verdicts is None:
                backfill.retake(passable, before)
                trial.keep()
        return verdicts

    def _fit_now(self, ctx: JobContext) -> dict[str, Verdict] | None:
        state = self.state
        verdicts = {name: self.fits(ctx, c) for name, c in state.clusters.items()}
        fitting = [
            Candidate(state.clusters[name], v.assignment, v.estimate)
            for name, v in verdicts.items()
            if v.status.ok and v.assignment is not None
        ]
        if not fitting:
            return verdicts
        self._place(ctx, fitting)
        return None

    def _wait(
        self, ctx: JobContext, reasons: dict[str, Status], helpable: list[ClusterState]
    ) -> None:
        """Leave the job pending, with a reservation if it earns one."""
        reserved = None
        if self.config.backfill:
            reserved = self.backfill.reserve(ctx, helpable, self.fits)
        if reserved is not None:
            cluster = reserved.placement.cluster
            status = reasons[cluster]
            reasons[cluster] = Status(
                status.code, f"{status.reason}; {reserved.reason}", status.plugin
            )
            self.reserved.append(reserved)
            self.changes += 1
        elif self.backfill.notes:
            reasons = self.backfill.annotate(reasons)
        self.pending.append(Pending(ctx.job, reasons))

    def _helps(self, verdict: Verdict) -> bool:
        """Whether evicting jobs could change this cluster's answer."""
        status: Status = verdict.status
        return status.code is Code.UNSCHEDULABLE and status.plugin not in self.cluster_filters

    def _place(self, ctx: JobContext, fitting: list[Candidate]) -> None:
        ranks = self.profile.rank(ctx, fitting)
        best = max(
            range(len(fitting)), key=lambda i: (ranks[i]["total"], -fitting[i].cluster.order)
        )
        chosen = fitting[best]
        estimate = chosen.estimate
        placement = Placement.of(
            ctx.job,
            chosen.cluster.name,
            chosen.assignment,
            estimate.replicas if estimate is not None else (),
        )
        self.state.place(placement)
        self.placed.append(Placed(placement, ranks[best]))
        self.changes += 1
        job = ctx.job
        queues, elastic = self.placed_at.get(job.priority, (set(), False))
        queues.add(job.queue)
        self.placed_at[job.priority] = (queues, elastic or job.elastic)

    def _no_victims_placed(self, job: Job) -> bool:
        """Whether nothing placed so far in this cycle could be a victim of `job` in the next
        (this cycle's placements are no victims in it): every one of higher priority, or of
        its priority in its own queue and not elastic (reclaim and shrinking aside)."""
        for priority, (queues, elastic) in self.placed_at.items():
            if priority < job.priority or (
                priority == job.priority and (elastic or queues - {job.queue})
            ):
                return False
        return True

    def _invalid(self, job: Job) -> str:
        if job.queue not in self.state.quota.queues:
            return f"unknown queue {job.queue!r}"
        if job.id in self.state.placements:
            return "job is already placed"
        if not job.tasks:
            return "job has no tasks"
        for task in job.tasks:
            if task.replicas < 1:
                return f"task {task.name}: replicas must be >= 1"
            if task.elastic is not None and not (
                1 <= task.elastic.min <= task.replicas <= task.elastic.max
            ):
                return f"task {task.name}: replicas must be within its elastic bounds"
            if task.accelerators is not None and not task.accelerators.options:
                return f"task {task.name}: no accelerator flavor to choose from"
        return ""
