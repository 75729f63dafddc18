"""The agent: registers, keeps the hub's inventory in step, realizes assignments, reports status.

Survives hub restarts and network cuts: every failure of a hub call ends the session, and the
next session (after backoff with jitter) registers again, sends a full inventory, resumes
assignments from the last revision and re-sends the current status of every placement. All
three are idempotent on the hub. A status is sent again whenever its state, reason or message
changes (a waiting pod's scheduler message included), and so is a change of any replica's
attempt, phase, node, exit code, reason or restarts (`replica_statuses`). A replica that failed
for a reason of its own runs again in place as a new pod (same placement, hostname and rank;
the failed pod is kept like a finished one) until its failures exceed the job's
`backoffLimit`; only then is the placement Failed (`cluster_agents.agent.status`). Pods of a
placement the hub no longer holds, or of an older epoch, are deleted (fencing; finished ones
only after `keep_finished_s`, so that their logs can still be read) — but only once the agent
has caught up with the assignment stream, so a restarted agent never deletes work it has not
heard about yet.

Elastic resizes: the hub changes an Active placement's replica counts under a new revision of
the same epoch. More replicas are pods rendered like the first ones (hostnames, service and
ranks follow on); fewer leave the highest indexes out of the wanted pods, so they are fenced
like any other, and their pods are never reported (`Assignment.holds`): a removed replica is
not a failed one. The placement runs once its minimum runs (grown replicas may still wait).

Leases: the agent renews its cluster's lease every few seconds for its whole life (sessions or
not), from a thread of its own (`cluster_agents.agent.lease`: a busy event loop never delays
it), saying whether it reaches its kube-apiserver. When it could not renew for a whole lease
it stops the pods of its *exclusive* jobs itself (the hub requeues them only after the lease
and a margin), and reports them evicted once back. Errors of the cluster's API never end the
agent: starting is retried with back-off (the lease says why the apiserver is unreachable), and
a failed reconciliation is retried. A hub answer of 4xx is permanent for that request: the
status or inventory report is dropped, a refused registration retried at the longest back-off.
See docs/failover.md.

Services: a shard's (`Assignment.service`) pods restart in place and never succeed; the
agent puts a ClusterIP Service in front of them (`apply_service` whenever what it should be
changes), rolls them over to a newer template generation one replica at a time
(`cluster_agents.agent.rollout`), reads an autoscaled shard's metric from its ready pods
(`cluster_agents.agent.metric_reader`) and reports it all as `StatusUpdate.serving`, sent again
when any of it changes (at most once per metric reading for the metric).

Gangs: their pods are created behind a scheduling gate, and the gates are lifted only once
every pod of the gang exists (`gates_to_lift`), so the extender sees the whole gang at bind.
Where the vendor's collective library reads a rank table, the agent rewrites the placement's
once its pods are bound and have addresses (`cluster_agents.agent.ranktable`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cluster_agents.agent import rollout
from cluster_agents.agent.backend import ClusterBackend, PodSpec, PodStatus, ShardService
from cluster_agents.agent.hub_client import HubApi, HubRejected, HubUnavailable
from cluster_agents.agent.lease import LeaseRenewer
from cluster_agents.agent.logs import LogStreamer
from cluster_agents.agent.metric_reader import MetricReader, Target, pod_url
from cluster_agents.agent.ranktable import RankTableMount, placement_tables
from cluster_agents.agent.render import RenderError, render
from cluster_agents.agent.serving import Reading, device_reading, serving_status, shard_service
from cluster_agents.agent.status import latest, next_attempt, replica_statuses, summarize
from cluster_agents.agent.telemetry import TelemetryLoop
from federation.aio import cancel_all, sleep_unless_stopped
from federation.catalog import Catalog
from federation.spec import DEFAULT_GRACE_SECONDS
from federation.wire import annotations as ann
from federation.wire.agent import (
    Assignment,
    InventoryReport,
    NodeInfo,
    Registration,
    StatusReport,
    StatusUpdate,
)

log = logging.getLogger(__name__)
PAGE = 500  # the hub's assignment page size


@dataclass(frozen=True)
class AgentConfig:
    """Identity of the cluster and the agent's pacing."""

    cluster: str
    namespace: str = "suanpan"  # prefix of the tenant namespaces (`tenant_namespace`)
    region: str = ""
    zone: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    agent_version: str = "0.1.0"
    poll_wait_s: float = 10.0
    grace_seconds: int = DEFAULT_GRACE_SECONDS
    debounce_s: float = 0.1
    # under steady churn at most this share of the agent's time goes to reconciling: after a
    # reconcile of d seconds the next waits d x (1 / share - 1) at least (a work queue's rate
    # limit: changes that arrive meanwhile are taken together)
    reconcile_share: float = 0.25
    backoff_max_s: float = 30.0
    keep_finished_s: float = 3600.0  # finished pods outlive their placement this long (logs)
    telemetry_interval_s: float = 10.0  # device exporters are read this often
    metric_interval_s: float = 5.0  # autoscaled services' pods are read this often


Said = tuple[str, str, str, tuple[tuple[object, ...], ...], object]


def _said(update: StatusUpdate) -> Said:
    """What an update tells the hub: a change of any of it is worth sending again."""
    replicas = tuple(
        (r.task, r.replica, r.attempt, r.phase, r.node, r.exit_code, r.reason, r.restarts)
        for r in update.replicas
    )
    return update.state, update.reason, update.message, replicas, update.serving


def gates_to_lift(wanted: dict[str, PodSpec], pods: list[PodStatus]) -> list[str]:
    """Gated pods of gangs whose every pod exists: the accelerator pods (those the extender
    binds, with `GANG`) at once, the others once every accelerator pod is bound."""
    status = {p.name: p for p in pods}
    gangs: defaultdict[str, list[PodSpec]] = defaultdict(list)
    for spec in wanted.values():
        if spec.gang:
            gangs[spec.gang].append(spec)
    lift: list[str] = []
    for specs in gangs.values():
        if any(s.name not in status for s in specs):
            continue  # a restarted agent creates the missing ones first
        binding = [s.name for s in specs if ann.GANG in s.annotations]
        rest = [s.name for s in specs if ann.GANG not in s.annotations]
        ready = all(status[n].node for n in binding)
        lift += [n for n in (binding + rest if ready else binding) if status[n].gated]
    return lift


class AgentMetrics:
    """Prometheus metrics of one agent."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.resyncs = Counter(
            "suanpan_agent_resyncs", "Full inventory resyncs sent to the hub", registry=registry
        )
        self.sessions = Counter("suanpan_agent_sessions", "Hub sessions started", registry=registry)
        self.apply_seconds = Histogram(
            "suanpan_agent_assignment_apply_seconds",
            "Time from receiving an assignment to its pods being created",
            registry=registry,
        )


class Agent:
    """One member cluster's agent over a backend."""

    def __init__(
        self,
        config: AgentConfig,
        backend: ClusterBackend,
        catalog: Catalog,
        hub: HubApi,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.config = config
        self.backend = backend
        self.catalog = catalog
        self.hub = hub
        self.metrics = AgentMetrics(registry)
        self.telemetry = TelemetryLoop(backend, hub, interval_s=config.telemetry_interval_s)
        self.telemetry.on_reading = lambda: self._wake.set()
        self.revision = 0
        self.active: dict[str, Assignment] = {}  # job -> its current Active assignment
        self.released: dict[str, int] = {}  # job -> highest released epoch
        self.graces: dict[str, int] = {}  # job -> its pods' grace period, when it names one
        self.caught_up = False  # the assignment stream has been read to its end once
        self._reported: dict[tuple[str, int], Said] = {}  # what was last sent per placement
        self._sent: dict[str, NodeInfo] = {}
        self._finished: dict[str, float] = {}  # kept finished pod -> when first seen fenced
        self._tables: dict[tuple[str, RankTableMount], str] = {}  # rank tables as last written
        # each active job's pods as last rendered, with the assignment and attempts rendered
        self._rendered: dict[str, tuple[Assignment, dict[tuple[str, int], int], list[PodSpec]]] = {}
        # each service shard's Service as last applied, and its cluster IP
        self._services: dict[str, tuple[ShardService, str]] = {}
        self.metrics_reader = MetricReader(
            self._metric_targets, lambda: self._wake.set(), interval_s=config.metric_interval_s
        )
        self._generation = 0
        self._wake = asyncio.Event()
        self.gang_timeout_s = 120.0  # the hub's, learnt at every registration
        self.lease = LeaseRenewer(hub, lambda: self.apiserver_problem, self._lease_lost)
        self._stopping: asyncio.Task[None] | None = None  # exclusive jobs being stopped
        self._start_problem: str | None = "starting"  # why the backend has not started yet
        Gauge(
            "suanpan_agent_apiserver_reachable",
            "1 while the agent's list and watch of its cluster are current",
            registry=registry,
        ).set_function(lambda: float(self.apiserver_problem is None))
        Gauge(
            "suanpan_agent_lease_age_seconds",
            "Seconds since the last lease renewal the hub accepted was sent",
            registry=registry,
        ).set_function(lambda: self.lease.age_s)

    @property
    def apiserver_problem(self) -> str | None:
        """Why the agent cannot reach its cluster's API now (None: it can)."""
        return self._start_problem or self.backend.apiserver_problem()

    async def run(self, stop: asyncio.Event) -> None:
        """Renew the lease and run sessions with the hub until `stop` is set."""
        self.lease.start()
        streams = asyncio.create_task(LogStreamer(self.backend, self.hub).run(stop))
        try:
            if await self._start_backend(stop):
                readers = [
                    asyncio.create_task(self.telemetry.run(stop)),
                    asyncio.create_task(self.metrics_reader.run(stop)),
                ]
                try:
                    await self._sessions(stop)
                finally:
                    await cancel_all(readers)
        finally:
            tasks = [streams] if self._stopping is None else [streams, self._stopping]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, self.lease.stop(), return_exceptions=True)
            await self.hub.close()
            await self.backend.stop()

    async def _start_backend(self, stop: asyncio.Event) -> bool:
        """Start the backend, retrying with back-off; False when stopped first."""
        backoff = 0.5
        while not stop.is_set():
            try:
                await self.backend.start()
                self._start_problem = None
                return True
            except Exception as exc:  # any failure to reach the cluster: retried, never fatal
                self._start_problem = f"cannot start: {exc!r}"[:512]
                log.warning("cluster API unreachable (%s); retrying in %.1f s", exc, backoff)
                await sleep_unless_stopped(stop, backoff * random.uniform(0.5, 1.5))
                backoff = min(backoff * 2, self.config.backoff_max_s)
        return False

    async def _sessions(self, stop: asyncio.Event) -> None:
        backoff = 0.5
        while not stop.is_set():
            try:
                await self._session(stop)
                backoff = 0.5
            except HubUnavailable as exc:
                if exc.retry_after_s is not None:  # the hub answered and said when: no back-off
                    backoff = 0.5
                    delay = min(exc.retry_after_s, self.config.backoff_max_s)
                    delay *= random.uniform(1.0, 1.5)
                else:
                    delay = backoff * random.uniform(0.5, 1.5)
                    backoff = min(backoff * 2, self.config.backoff_max_s)
                log.warning("hub unavailable: %s; retrying in %.1f s", exc, delay)
                await sleep_unless_stopped(stop, delay)
            except HubRejected as exc:
                log.error(
                    "hub refused the session: %s; retrying in %.0f s",
                    exc,
                    self.config.backoff_max_s,
                )
                await sleep_unless_stopped(stop, self.config.backoff_max_s)
            except Exception:  # the cluster's API failing under a new session, or a bug:
                # retried, never fatal (an exited agent stops renewing its lease, and its
                # exclusive jobs stop with it)
                log.exception("session failed; retrying in %.1f s", backoff)
                await sleep_unless_stopped(stop, backoff * random.uniform(0.5, 1.5))
                backoff = min(backoff * 2, self.config.backoff_max_s)

    # --- the lease (renewed from its own thread: cluster_agents.agent.lease) ------------

    def _lease_lost(self) -> None:
        """Called on this loop at every renewal period while the lease is lost."""
        if self._stopping is None or self._stopping.done():
            self._stopping = asyncio.create_task(self._stop_exclusive())

    async def _stop_exclusive(self) -> None:
        """Stop the pods of exclusive jobs, and of jobs not known to be fast (an agent that
        restarted without reaching the hub): without a lease they may run elsewhere soon. They
        are released here, so that a reconnected agent reports them evicted."""
        for job, assignment in list(self.active.items()):
            if assignment.failover == "exclusive":
                log.warning("lease lost: stopping exclusive job %s", job)
                del self.active[job]
                self.released[job] = max(self.released.get(job, 0), assignment.epoch)
        doomed = [p for p in self.backend.pods() if p.job not in self.active and not p.deleting]
        if doomed:
            try:
                await self._delete(doomed)
            except Exception as exc:  # retried at the next renewal period
                log.warning("cannot stop exclusive pods: %s", exc)

    async def _session(self, stop: asyncio.Event) -> None:
        self.metrics.sessions.inc()
        facts = await self.backend.facts()
        reply = await self.hub.register(
            Registration(
                cluster=self.config.cluster,
                region=self.config.region,
                zone=self.config.zone,
                labels=self.config.labels,
                kubernetes_version=facts.kubernetes_version,
                agent_version=self.config.agent_version,
            )
        )
        self._generation = max(self._generation, reply.inventory_generation)
        self.gang_timeout_s = reply.gang_timeout_s
        await self._send_full()
        self.telemetry.resync()
        self._reported.clear()  # re-send every status: the hub may have missed some
        tasks = [
            asyncio.create_task(self._assignment_loop(stop)),
            asyncio.create_task(self._cluster_loop(stop)),
        ]
        try:
            done, _ = await asyncio.wait(
                [*tasks, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                if task in tasks and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        finally:
            await cancel_all(tasks)

    # --- inventory -----------------------------------------------------------------------

    async def _send_full(self) -> None:
        nodes = self.backend.nodes()
        self._generation += 1
        ack = await self.hub.inventory(
            InventoryReport(generation=self._generation, full=True, nodes=nodes)
        )
        self._generation = ack.generation
        self._sent = {n.name: n for n in nodes}
        self.metrics.resyncs.inc()

    async def _send_delta(self) -> None:
        current = {n.name: n for n in self.backend.nodes()}
        changed = [n for name, n in current.items() if self._sent.get(name) != n]
        removed = [name for name in self._sent if name not in current]
        if not changed and not removed:
            return
        try:
            ack = await self.hub.inventory(
                InventoryReport(
                    generation=self._generation + 1, full=False, nodes=changed, removed=removed
                )
            )
        except HubRejected as exc:
            log.error("hub refused an inventory delta, dropped: %s", exc)
            self._sent = current
            return
        if ack.resync or ack.generation != self._generation + 1:
            self._generation = max(self._generation, ack.generation)
            await self._send_full()
            return
        self._generation = ack.generation
        self._sent = current

    # --- assignments ---------------------------------------------------------------------

    def _take(self, item: Assignment) -> None:
        job = str(item.job)
        if item.grace_period_seconds is not None:
            self.graces[job] = item.grace_period_seconds
        if item.state == "Active":
            if item.epoch > self.released.get(job, 0) and (
                job not in self.active or self.active[job].epoch <= item.epoch
            ):
                self.active[job] = item
        else:
            self.released[job] = max(self.released.get(job, 0), item.epoch)
            if job in self.active and self.active[job].epoch <= item.epoch:
                del self.active[job]

    async def _assignment_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            wait = self.config.poll_wait_s if self.caught_up else 0.0
            batch = await self.hub.assignments(self.revision, wait)
            for item in batch.items:
                self._take(item)
            self.revision = batch.revision
            if len(batch.items) < PAGE:
                self.caught_up = True
            if batch.items:
                self._wake.set()

    # --- cluster reconciliation and status ------------------------------------------------

    async def _cluster_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            start = time.perf_counter()
            try:
                await self.reconcile()
                await self._send_delta()
            except (HubUnavailable, asyncio.CancelledError):
                raise
            except Exception as exc:  # the cluster's API failed: try again at the next change
                log.warning("reconciliation failed (%s); retrying", exc)
            took = time.perf_counter() - start
            await self._wait_for_change(took * (1 / self.config.reconcile_share - 1))

    async def _wait_for_change(self, rest_s: float) -> None:
        """Until the cluster or the assignments change, then `debounce_s` (or `rest_s`, when
        longer) for the changes that come with it."""
        changed = asyncio.create_task(self.backend.changed.wait())
        woken = asyncio.create_task(self._wake.wait())
        try:
            await asyncio.wait([changed, woken], timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            woken.cancel()
        self.backend.changed.clear()
        self._wake.clear()
        await asyncio.sleep(max(self.config.debounce_s, rest_s))

    def _wanted(self, pods: list[PodStatus]) -> tuple[dict[str, PodSpec], set[str]]:
        """The pods of the active assignments, each replica at the attempt it should run: the
        next one after a failure of its own, up to the job's `backoffLimit` (`next_attempt`);
        a service's replicas at the step of their rolling update (`rollout.plan`: its pods
        restart in place, never as a next attempt). Also the names of the older-generation
        pods the rollouts keep for now."""
        current = latest(pods)
        wanted: dict[str, PodSpec] = {}
        kept: set[str] = set()
        for job, assignment in self.active.items():
            limit = assignment.failure_policy.backoff_limit
            serving = assignment.service
            attempts = {
                (t.task.name, r): next_attempt(
                    current.get((job, assignment.epoch, t.task.name, r)), limit
                )
                for t in assignment.tasks
                for r in range(t.task.replicas)
                if serving is None
            }
            steps = {
                t.task.name: rollout.plan(
                    serving.generation,
                    t.task.replicas,
                    (
                        p
                        for p in pods
                        if (p.job, p.epoch, p.task) == (job, assignment.epoch, t.task.name)
                    ),
                )
                for t in assignment.tasks
                if serving is not None
            }
            kept.update(name for step in steps.values() for name in step.keep)
            try:
                for pod in self._render(job, assignment, attempts):
                    if serving is None or pod.replica in steps[pod.task].current:
                        wanted[pod.name] = pod
            except RenderError as exc:
                log.error("cannot render job %s: %s", assignment.job, exc)
        self._rendered = {j: r for j, r in self._rendered.items() if j in self.active}
        return wanted, kept

    def _render(
        self, job: str, assignment: Assignment, attempts: dict[tuple[str, int], int]
    ) -> list[PodSpec]:
        """`render`'s pods of an assignment, rendered again only when the assignment (a new
        revision replaces the object) or its replicas' attempts changed: every reconcile asks
        for the pods of every active assignment."""
        cached = self._rendered.get(job)
        if cached is not None and cached[0] is assignment and cached[1] == attempts:
            return cached[2]
        pods = render(assignment, self.config.namespace, self.catalog, attempts)
        self._rendered[job] = (assignment, attempts, pods)
        return pods

    async def reconcile(self) -> None:
        """Create missing pods, delete fenced ones, and report what changed."""
        start = time.perf_counter()
        pods = self.backend.pods()
        wanted, kept = self._wanted(pods)
        existing = {p.name for p in pods}
        missing = [spec for name, spec in wanted.items() if name not in existing]
        if missing:
            await self.backend.create_pods(missing)
            self.metrics.apply_seconds.observe(time.perf_counter() - start)
            pods = self.backend.pods()
        await self._apply_services()
        if self.caught_up:
            fenced = self._expired(
                [p for p in pods if p.name not in wanted and p.name not in kept and not p.deleting]
            )
            if fenced:
                await self._delete(fenced)
        lift = gates_to_lift(wanted, pods)
        if lift:
            await self.backend.ungate_pods(lift)
        await self._write_rank_tables(wanted, pods)
        await self._report(pods)

    async def _apply_services(self) -> None:
        """Apply each active shard's Service when it should differ from what was applied (once
        per shard after a restart: the agent does not know what the cluster holds)."""
        wanted = {
            job: shard_service(a, a.service, self.config.namespace)
            for job, a in self.active.items()
            if a.service is not None
        }
        self._services = {k: v for k, v in self._services.items() if wanted.get(k) == v[0]}
        for job, service in wanted.items():
            if job not in self._services:
                try:
                    self._services[job] = (service, await self.backend.apply_service(service))
                except Exception as exc:  # the cluster's API failed: again at the next pass
                    log.warning("cannot apply service %s of job %s: %s", service.name, job, exc)

    def _reading(self, assignment: Assignment, pods: list[PodStatus]) -> Reading | None:
        """An autoscaled shard's metric: read from its pods' pages, or (scaling by its devices'
        utilization) from the exporters' last readings of the devices its pods hold."""
        scaling = assignment.service.autoscaling if assignment.service else None
        if scaling is None or scaling.source == "pods":
            return self.metrics_reader.readings.get((str(assignment.job), assignment.epoch))
        flavor = next((t.flavor for t in assignment.tasks if t.flavor), None)
        if flavor is None:
            return None
        return device_reading(pods, flavor, self.telemetry.latest)

    def _metric_targets(self) -> list[Target]:
        """The ready pods of the autoscaled shards, for the metric reader."""
        ready: defaultdict[tuple[str, int], list[str]] = defaultdict(list)
        for pod in self.backend.pods():
            if pod.ready and pod.pod_ip:
                ready[(pod.job, pod.epoch)].append(pod.pod_ip)
        targets = []
        for job, assignment in self.active.items():
            scaling = assignment.service.autoscaling if assignment.service else None
            if scaling is not None and scaling.source == "pods":
                ips = ready.get((job, assignment.epoch), [])
                urls = tuple(pod_url(ip, scaling.port, scaling.path) for ip in ips)
                targets.append(Target((job, assignment.epoch), scaling.metric, urls))
        return targets

    async def _write_rank_tables(self, wanted: dict[str, PodSpec], pods: list[PodStatus]) -> None:
        """Write each placement's rank table when it changed (once per table after a restart:
        the agent does not know what the cluster holds)."""
        tables = placement_tables(wanted.values(), pods)
        self._tables = {k: v for k, v in self._tables.items() if k in tables}
        for (namespace, mount), content in tables.items():
            if self._tables.get((namespace, mount)) != content:
                await self.backend.write_rank_table(namespace, mount, content)
                self._tables[(namespace, mount)] = content

    async def _delete(self, pods: list[PodStatus]) -> None:
        """Delete pods, each with its job's grace period (SIGTERM, then SIGKILL after it: the
        time a job has to checkpoint), else the agent's."""
        by_grace: dict[int, list[str]] = defaultdict(list)
        for pod in pods:
            by_grace[self.graces.get(pod.job, self.config.grace_seconds)].append(pod.name)
        for grace, names in sorted(by_grace.items()):
            await self.backend.delete_pods(names, grace)

    def _expired(self, fenced: list[PodStatus]) -> list[PodStatus]:
        """The fenced pods to delete now: running ones at once, finished ones (kept for their
        logs) once `keep_finished_s` has passed since the agent first saw them fenced."""
        now = self.backend.now()
        seen = {p.name for p in fenced}
        self._finished = {n: t for n, t in self._finished.items() if n in seen}
        doomed = []
        for pod in fenced:
            if pod.phase in ("Succeeded", "Failed"):
                since = self._finished.setdefault(pod.name, now)
                if now - since < self.config.keep_finished_s:
                    continue
            doomed.append(pod)
        return doomed

    async def _report(self, pods: list[PodStatus]) -> None:
        by_placement: dict[tuple[str, int], list[PodStatus]] = defaultdict(list)
        for pod in pods:
            by_placement[(pod.job, pod.epoch)].append(pod)
        updates = []
        for job, assignment in self.active.items():
            # a replica an elastic resize removed is not a failed one: its pods are not told
            placed = [
                p
                for p in by_placement.get((job, assignment.epoch), [])
                if assignment.holds(p.task, p.replica)
            ]
            summary = summarize(
                placed,
                assignment.replicas,
                now=self.backend.now(),
                gang_timeout_s=self.gang_timeout_s,
                fewest=assignment.fewest_replicas,
                serving=assignment.service is not None,
            )
            applied = self._services.get(job)
            if summary.state:
                updates.append(
                    StatusUpdate(
                        job=assignment.job,
                        epoch=assignment.epoch,
                        state=summary.state,
                        reason=summary.reason,
                        message=summary.message[:2048],
                        running=summary.running,
                        succeeded=summary.succeeded,
                        failed=summary.failed,
                        replicas=replica_statuses(placed),
                        serving=serving_status(
                            applied[0],
                            assignment.service,
                            applied[1],
                            [p for p in placed if not p.deleting],
                            self._reading(assignment, placed),
                        )
                        if assignment.service is not None and applied is not None
                        else None,
                    )
                )
        if self.caught_up:
            with_pods = {j for j, _ in by_placement}
            for job, epoch in self.released.items():
                if job not in self.active and job not in with_pods:
                    updates.append(StatusUpdate(job=job, epoch=epoch, state="Evicted"))
        fresh = [u for u in updates if self._reported.get((str(u.job), u.epoch)) != _said(u)]
        if not fresh:
            return
        try:
            await self.hub.status(StatusReport(updates=fresh))
        except HubRejected as exc:  # sent again only once something about them changes
            log.error("hub refused %d status updates, dropped: %s", len(fresh), exc)
        for u in fresh:
            self._reported[(str(u.job), u.epoch)] = _said(u)
            if u.state == "Evicted" and self.released.get(str(u.job)) == u.epoch:
                del self.released[str(u.job)]  # torn down and acknowledged: nothing left to do
                self.graces.pop(str(u.job), None)
