"""Read one scheduling snapshot from PostgreSQL: clusters, queues, placements, pending jobs."""

from __future__ import annotations

import itertools
import logging
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.catalog import Catalog
from federation.compiled import CompiledJob, JobFacts, core_job, held_replicas
from federation.controllers.pacing import WHOLE, Window
from federation.controllers.row_stamps import (
    HELD_STAMPS,
    JOB_STAMPS,
    StampedRows,
    held_from,
    job_among,
    of_jobs,
)
from federation.inventory import DeviceRow, core_node
from federation.scheduling.model import (
    Cluster,
    Elastic,
    Job,
    Node,
    Placement,
    Queue,
    Quota,
    ReplicaPlacement,
    Snapshot,
    Task,
)
from federation.store.database import fetch_records
from federation.store.lifecycle import UNCOUNTED_STATES
from federation.store.tables import (
    clusters,
    device_telemetry,
    devices,
    events,
    jobs,
    nodes,
    placements,
    queues,
    replica_status,
    tenants,
)
from federation.store.telemetry import DEVICE_READING

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobRef:
    """What the writer needs to apply a decision about a job safely."""

    id: uuid.UUID
    version: int
    state: str
    epoch: int
    reason: str
    pending_reasons: dict[str, Any]
    revision: int = 0  # of its active placement (0: none)
    # the job's id as the core names it (kept: a read asks it of every job, every cycle)
    key: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", str(self.id))


def job_ref(row: Any, revision: int = 0) -> JobRef:
    """What the writer needs of a held job's row (with its placement's `revision`) or a
    queued one's."""
    return JobRef(
        row.id, row.version, row.state, row.epoch, row.reason, row.pending_reasons, revision
    )


@dataclass
class Read:
    """A snapshot plus what goes with it: pending jobs, row refs, untranslatable jobs."""

    snapshot: Snapshot
    pending: list[Job]
    refs: dict[str, JobRef]
    cluster_ids: dict[str, uuid.UUID]
    invalid: dict[str, str] = field(default_factory=dict)  # job id -> why it cannot be modeled


# a job's compiled form as of a moment: (job id, 0) for a batch job, whose form never changes;
# (job id, row version) for a service's shard, whose form a service update replaces
FormKey = tuple[uuid.UUID, int]


def form_key(row: Any) -> FormKey:
    """The key of the compiled form a job row (`id`, `version`, `service_id`) has now."""
    return (row.id, row.version if row.service_id is not None else 0)


def capped(tasks: tuple[Task, ...], cap: int) -> tuple[Task, ...]:
    """The tasks of a service's shard allowed at most `cap` replicas (never below the floor):
    the core grows an elastic task to its ceiling and scales it in above it."""
    return tuple(
        replace(t, elastic=Elastic(t.elastic.min, max(t.elastic.min, min(t.elastic.max, cap))))
        if t.elastic is not None
        else t
        for t in tasks
    )


@dataclass(frozen=True, slots=True)
class QueuedModel:
    """What a read derives from a queued job's row, run times aside: its `JobRef` and its
    core job (None: it cannot be modeled, for the reason `invalid` gives), given the clusters
    where its gang failed to start (`avoided`)."""

    ref: JobRef
    avoided: frozenset[str]
    job: Job | None
    invalid: str | None


@dataclass(frozen=True, slots=True)
class HeldModel:
    """What a read derives from a held job's row, run times aside: its `JobRef`, the cluster
    it holds (by id and name) and its placement as the core models it (None: it cannot be
    modeled, for the reason `invalid` gives), and what each read asks of it, kept."""

    ref: JobRef
    cluster_id: uuid.UUID | None
    cluster: str
    placement: Placement | None
    invalid: str | None
    elastic: bool  # whether the placement's replica counts may change
    reservation: bool  # placed where the cluster does not count it yet (`UNCOUNTED_STATES`)
    preempting: bool


RETAIN = 16  # cycles a queued job outside the window keeps what was modeled from it
PRUNE_EVERY = 16  # reads between two prunes of the compiled forms no read needs any more


class CompiledCache:
    """What never changes for a compiled form (its decoded job and core tasks, by `FormKey`;
    a shard's tasks under each cap) and for a placement (job id, epoch, revision: its
    flavors, replicas and counts), decoded once and forgotten at a prune once no read sees
    it; and the rows of held and of queued jobs with what was derived from them
    (`held_rows`, `queued_rows`: kept while unchanged, see `row_stamps`)."""

    def __init__(self) -> None:
        self._jobs: dict[FormKey, tuple[CompiledJob, tuple[Task, ...]] | str] = {}
        self._capped: dict[tuple[FormKey, int], tuple[Task, ...]] = {}
        self._placements: dict[tuple[uuid.UUID, int, int], dict[str, Any]] = {}
        self._seen: set[uuid.UUID] = set()  # jobs loaded since the last prune
        self._reads = 0
        self.held_rows: StampedRows[HeldModel] = StampedRows()
        # a queued job keeps its model through a rotation of the window over a queue of up to
        # head + RETAIN * rotating jobs; a longer queue's are decoded again when they return
        self.queued_rows: StampedRows[QueuedModel] = StampedRows(retain=RETAIN)
        self.rotation = 0  # where the pending window continues next cycle
        self.cluster_names: dict[uuid.UUID, str] = {}  # as of the last read

    async def load(
        self,
        conn: AsyncConnection,
        keys: list[FormKey],
        held: list[tuple[uuid.UUID, int, int]],
    ) -> None:
        """Fetch and decode the compiled forms and placements not known yet."""
        self._seen.update(job_id for job_id, _ in keys)
        missing = {key[0]: key for key in keys if key not in self._jobs}
        if missing:
            for job_id, raw in await conn.execute(
                sa.select(jobs.c.id, jobs.c.compiled).where(job_among(list(missing)))
            ):
                self._jobs[missing[job_id]] = self._decode(raw)
        wanted = {h for h in held if h not in self._placements}
        if wanted:
            rows = await conn.execute(
                sa.select(
                    placements.c.job_id,
                    placements.c.epoch,
                    placements.c.revision,
                    placements.c.assignment,
                ).where(
                    placements.c.job_id.in_({job_id for job_id, _, _ in wanted}),
                    placements.c.state == "Active",
                )
            )
            for job_id, epoch, revision, assignment in rows:
                if (job_id, epoch, revision) in wanted:
                    self._placements[(job_id, epoch, revision)] = assignment

    @staticmethod
    def _decode(raw: Any) -> tuple[CompiledJob, tuple[Task, ...]] | str:
        if raw is None:
            return "the job has no compiled form (run `suanpan-hub migrate`)"
        try:
            compiled = CompiledJob.model_validate(raw)
        except ValidationError as exc:
            return f"the job's compiled form is invalid: {exc}"
        return compiled, compiled.core_tasks()

    def get(self, key: FormKey, cap: int | None = None) -> tuple[CompiledJob, tuple[Task, ...]]:
        """The decoded job (after `load`), its tasks capped at `cap` replicas when given (a
        shard's `replica_cap`); raises ValueError when its form is unusable."""
        found = self._jobs[key]
        if isinstance(found, str):
            raise ValueError(found)
        if cap is None:
            return found
        compiled, tasks = found
        if (key, cap) not in self._capped:
            self._capped[(key, cap)] = capped(tasks, cap)
        return compiled, self._capped[(key, cap)]

    def placement(
        self, job_id: uuid.UUID, epoch: int, revision: int, job: Job
    ) -> tuple[Job, tuple[str, ...], tuple[ReplicaPlacement, ...]]:
        """The job holding its placement's replica counts, flavor per task and known
        replicas of the job's placement at `epoch` and `revision`."""
        assignment = self._placements.get((job_id, epoch, revision), {})
        flavors = assignment.get("flavors", {})
        index = {t.name: i for i, t in enumerate(job.tasks)}
        for name, count in held_replicas(assignment).items():
            if name in index:
                job = job.with_replicas(index[name], count)
        return (
            job,
            tuple(flavors.get(t.name) or "" for t in job.tasks),
            tuple(
                ReplicaPlacement(index[h["task"]], h["node"], tuple(h["devices"]))
                for h in assignment.get("hints", [])
                if h["task"] in index
            ),
        )

    def prune(self, alive: Iterable[uuid.UUID]) -> None:
        """At every `PRUNE_EVERY`-th read, forget the jobs neither `alive` (the jobs of this
        read, consumed only then) nor loaded since the last prune (marking every job each read
        cost as much as the held jobs, every cycle)."""
        self._reads += 1
        if self._reads % PRUNE_EVERY:
            return
        self._seen.update(alive)
        keys = {k: v for k, v in self._jobs.items() if k[0] in self._seen}
        self._jobs = keys
        self._capped = {k: v for k, v in self._capped.items() if k[0] in keys}
        self._placements = {k: v for k, v in self._placements.items() if k[0] in self._seen}
        self._seen = set()


def _seconds(ts: datetime | None) -> float:
    return ts.timestamp() if ts is not None else 0.0


Generation = tuple[int, datetime | None]  # a cluster's inventory generation, telemetry time


class FleetCache:
    """Each cluster's nodes as the core models them, by inventory generation and telemetry
    time. A cycle reads nothing of a cluster whose agent did not report since the last cycle;
    after an inventory delta it reads only the nodes the delta wrote (a node row carries the
    generation of the report that wrote it) and the names of the rest (to drop removed ones);
    after a telemetry report, or a full snapshot, the whole cluster."""

    def __init__(self) -> None:
        self._nodes: dict[uuid.UUID, tuple[Generation, dict[str, Node], tuple[Node, ...]]] = {}

    def stale(self, generations: dict[uuid.UUID, Generation]) -> list[uuid.UUID]:
        """Clusters whose cached nodes are older than `generations` say (or not cached)."""
        self._nodes = {k: v for k, v in self._nodes.items() if k in generations}
        return [c for c, g in generations.items() if c not in self._nodes or self._nodes[c][0] != g]

    def since(self, cluster_id: uuid.UUID, generation: Generation) -> int | None:
        """The inventory generation after which the cluster's changed nodes are all that must
        be read to reach `generation`; None when the whole cluster must be read."""
        cached = self._nodes.get(cluster_id)
        if cached is None:
            return None
        (had, telemetry), _, _ = cached
        return had if telemetry == generation[1] and had < generation[0] else None

    def put(self, cluster_id: uuid.UUID, generation: Generation, found: tuple[Node, ...]) -> None:
        """Remember a cluster's nodes at `generation`."""
        self._nodes[cluster_id] = (generation, {n.name: n for n in found}, found)

    def update(
        self,
        cluster_id: uuid.UUID,
        generation: Generation,
        changed: Sequence[Node],
        names: Sequence[str],
    ) -> None:
        """Bring a cluster's nodes to `generation`: `changed` ones replaced or added, those
        not in `names` (every node the cluster has, in name order) dropped."""
        _, by_name, _ = self._nodes[cluster_id]
        by_name = {**by_name, **{n.name: n for n in changed}}
        ordered = tuple(by_name[name] for name in names)
        self._nodes[cluster_id] = (generation, {n.name: n for n in ordered}, ordered)

    def nodes(self, cluster_id: uuid.UUID) -> tuple[Node, ...]:
        """The cached nodes of a cluster, in name order."""
        return self._nodes[cluster_id][2]


async def _read_nodes(
    conn: AsyncConnection, catalog: Catalog, since: Mapping[uuid.UUID, int | None]
) -> dict[uuid.UUID, list[Node]]:
    """The nodes (with devices) of these clusters, in name order: of each, all of them (None)
    or those written after the inventory generation given."""
    written = sa.or_(
        *(
            sa.and_(nodes.c.cluster_id == c, nodes.c.generation > g)
            if g is not None
            else nodes.c.cluster_id == c
            for c, g in since.items()
        )
    )
    device_rows: dict[tuple[uuid.UUID, str], list[DeviceRow]] = defaultdict(list)
    t = device_telemetry
    for d in await conn.execute(
        sa.select(devices, t.c.utilization)
        .join(
            nodes,
            sa.and_(
                nodes.c.cluster_id == devices.c.cluster_id, nodes.c.name == devices.c.node_name
            ),
        )
        .outerjoin(t, DEVICE_READING)
        .where(written)
    ):
        m = d._mapping
        device_rows[(m["cluster_id"], m["node_name"])].append(
            DeviceRow(
                m["flavor"],
                m["index"],
                m["memory_mib"],
                m["healthy"],
                m["used_milli"],
                m["used_memory_mib"],
                m["utilization"],
            )
        )
    node_map: dict[uuid.UUID, list[Node]] = defaultdict(list)
    for n in await conn.execute(sa.select(nodes).where(written).order_by(nodes.c.name)):
        node_map[n.cluster_id].append(
            core_node(catalog, dict(n._mapping), device_rows.get((n.cluster_id, n.name), ()))
        )
    return node_map


async def _node_names(
    conn: AsyncConnection, cluster_ids: list[uuid.UUID]
) -> dict[uuid.UUID, list[str]]:
    """Every node name of these clusters, in name order."""
    names: dict[uuid.UUID, list[str]] = {c: [] for c in cluster_ids}
    for cluster_id, name in await conn.execute(
        sa.select(nodes.c.cluster_id, nodes.c.name)
        .where(nodes.c.cluster_id.in_(cluster_ids))
        .order_by(nodes.c.name)
    ):
        names[cluster_id].append(name)
    return names


async def clusters_of_fleet(
    conn: AsyncConnection, catalog: Catalog, cache: FleetCache | None = None
) -> tuple[list[Cluster], dict[str, uuid.UUID]]:
    """Every cluster with its nodes and devices, and the ids by cluster name."""
    cache = cache or FleetCache()
    rows = (await conn.execute(sa.select(clusters).order_by(clusters.c.name))).all()
    generations = {c.id: (c.inventory_generation, c.telemetry_at) for c in rows}
    stale = cache.stale(generations)
    if stale:
        since = {c: cache.since(c, generations[c]) for c in stale}
        fresh = await _read_nodes(conn, catalog, since)
        changed = [c for c, g in since.items() if g is not None]
        names = await _node_names(conn, changed) if changed else {}
        for cluster_id, after in since.items():
            found = tuple(fresh.get(cluster_id, ()))
            if after is None:
                cache.put(cluster_id, generations[cluster_id], found)
            else:
                cache.update(cluster_id, generations[cluster_id], found, names[cluster_id])
    out, ids = [], {}
    for c in rows:
        ids[c.name] = c.id
        out.append(
            Cluster(
                name=c.name,
                region=c.region,
                zone=c.zone,
                nodes=cache.nodes(c.id),
                labels=MappingProxyType(dict(c.labels)),
                ready=c.state == "Ready",
                cordoned=c.cordoned,
                accepted=c.accepted,
            )
        )
    return out, ids


_FLEET_SHAPE = sa.text(
    """
    SELECT (SELECT coalesce(sum(hashtextextended(
                concat_ws('|', id, name, region, zone, labels::text), 0)), 0) FROM clusters)
         + (SELECT coalesce(sum(hashtextextended(concat_ws('|', cluster_id, name, cpu_milli,
                memory_mib, pods, taints::text, labels::text), 0)), 0) FROM nodes)
         + (SELECT coalesce(sum(hashtextextended(
                concat_ws('|', cluster_id, node_name, flavor, index, memory_mib), 0)), 0)
            FROM devices)
    """
)


async def fleet_shape(conn: AsyncConnection) -> int:
    """One number that changes with what the fleet could hold if it were empty (its clusters,
    their nodes' capacity, labels and taints, their devices), not with what runs on it: cheap
    to compute in the database, to tell whether `clusters_of_fleet` must be read again."""
    return int(await conn.scalar(_FLEET_SHAPE) or 0)


async def queue_models(conn: AsyncConnection) -> list[Queue]:
    """Every queue as the core models it (named "<tenant>/<queue>")."""
    rows = await conn.execute(
        sa.select(queues, tenants.c.name.label("tenant")).join(
            tenants, tenants.c.id == queues.c.tenant_id
        )
    )
    return [
        Queue(
            name=f"{q.tenant}/{q.name}",
            tenant=q.tenant,
            cohort=q.cohort or "",
            weight=q.weight,
            quota=MappingProxyType(
                {res: Quota(v["nominal"], v.get("borrowingLimit")) for res, v in q.quota.items()}
            ),
        )
        for q in rows
    ]


async def _gang_failures(
    conn: AsyncConnection, cluster_names: dict[uuid.UUID, str]
) -> dict[uuid.UUID, frozenset[str]]:
    """Per queued job, the clusters where its gang failed to start in the last half hour."""
    rows = await conn.execute(
        sa.select(events.c.job_id, events.c.data["cluster_id"].astext)
        .join(jobs, jobs.c.id == events.c.job_id)
        .where(
            jobs.c.state == "Queued",
            events.c.kind == "Job",
            events.c.data["cluster_report"].astext == "Unschedulable",
            events.c.created_at > sa.func.now() - sa.text("interval '30 minutes'"),
        )
    )
    found: dict[uuid.UUID, set[str]] = defaultdict(set)
    for job_id, cluster_id in rows:
        name = cluster_names.get(uuid.UUID(cluster_id)) if cluster_id else None
        if name:
            found[job_id].add(name)
    return {job_id: frozenset(names) for job_id, names in found.items()}


def _run_time(row: Any, now: float) -> float:
    """How long a running job's current run has run: since its first start or, after a
    requeue, since its current placement (the run started no earlier); 0 unless Running
    (a Running job's row is a held one: it has `placed_at`)."""
    if row.state != "Running" or row.started_at is None:
        return 0.0
    return max(0.0, now - max(_seconds(row.started_at), _seconds(row.placed_at)))


async def _pending_rows(
    conn: AsyncConnection, base: sa.Select[Any], cache: CompiledCache, window: Window
) -> list[Any]:
    """The rows of `base` (of `of_jobs`) of the window's head of the queue plus its rotating
    part over the rest, so that every queued job is considered within
    ceil((queued - head) / rotating) cycles, whatever the queue's length."""
    head, rotating = window.head, window.rotating
    queued = base.where(
        jobs.c.state == "Queued",
        sa.or_(jobs.c.not_before.is_(None), jobs.c.not_before <= sa.func.now()),
    ).order_by(jobs.c.priority.desc(), jobs.c.queued_at, jobs.c.id)
    rows: list[Any] = await fetch_records(conn, queued.limit(head + rotating + 1))
    if len(rows) <= head + rotating:
        cache.rotation = 0
        return rows
    after = queued.offset(head + cache.rotation).limit(rotating)
    rest: list[Any] = await fetch_records(conn, after)
    if len(rest) < rotating:  # past the end: wrap to just behind the head
        wrap = await fetch_records(conn, queued.offset(head).limit(rotating - len(rest)))
        rest += wrap
        cache.rotation = len(wrap)
    else:
        cache.rotation += rotating
    seen = {r["id"] for r in rows[:head]}
    unique = {r["id"]: r for r in rest if r["id"] not in seen}
    return rows[:head] + list(unique.values())


async def _not_reported(
    conn: AsyncConnection, counted: dict[tuple[uuid.UUID, int], Placement]
) -> list[Placement]:
    """What running elastic placements hold that their clusters do not report yet: the known
    replicas (the placement's, a resize's included) whose pods were not reported past
    Pending, as reservations, like a placement not running yet; once reported running, the
    cluster's inventory counts their devices."""
    if not counted:
        return []
    r = replica_status.c
    rows = await conn.execute(
        sa.select(r.job_id, r.epoch, r.task, r.replica).where(
            sa.tuple_(r.job_id, r.epoch).in_(list(counted)),
            r.phase.not_in(("Pending", "Unknown")),
        )
    )
    reported = {(row.job_id, row.epoch, row.task, row.replica) for row in rows}
    out = []
    for (job_id, epoch), placement in counted.items():
        numbered: Counter[int] = Counter()  # a task's k-th known replica is its replica k
        waiting = []
        for replica in placement.replicas:
            task = placement.job.tasks[replica.task].name
            if (job_id, epoch, task, numbered[replica.task]) not in reported:
                waiting.append(replica)
            numbered[replica.task] += 1
        if waiting:
            out.append(replace(placement, replicas=tuple(waiting)))
    return out


async def read(
    conn: AsyncConnection,
    catalog: Catalog,
    *,
    now: float,
    cache: CompiledCache | None = None,
    fleet_cache: FleetCache | None = None,
    window: Window = WHOLE,
) -> Read:
    """Everything one cycle needs, read in the caller's (repeatable-read) transaction; of the
    queued jobs, those of `window`.

    Only what changed is read and decoded: held and queued jobs' rows and what is modeled from
    them come from `cache.held_rows` and `cache.queued_rows` unless their rows were written
    since (`row_stamps`), compiled forms and placements from `cache` when known (fetched for
    the jobs to model only), nodes from `fleet_cache` unless their cluster reported.
    """
    cache = cache or CompiledCache()
    fleet, cluster_ids = await clusters_of_fleet(conn, catalog, fleet_cache)
    cluster_names = {v: k for k, v in cluster_ids.items()}
    queue_list = await queue_models(conn)
    base = of_jobs(
        jobs.c.id,
        jobs.c.state,
        jobs.c.priority,
        jobs.c.preemptible,
        jobs.c.version,
        jobs.c.epoch,
        jobs.c.queued_at,
        jobs.c.started_at,
        jobs.c.checkpointed_at,
        jobs.c.reason,
        jobs.c.pending_reasons,
        jobs.c.cluster_id,
        jobs.c.service_id,
        jobs.c.replica_cap,
        tenants.c.name.label("tenant"),
        queues.c.name.label("queue"),
    )
    held_scan = await fetch_records(conn, HELD_STAMPS)
    full = held_from(
        base.add_columns(placements.c.created_at.label("placed_at"), placements.c.revision)
    )
    held = await cache.held_rows.read(
        conn,
        held_scan,  # when most changed (a cold start), one read of all is cheaper
        lambda ids: full if 2 * len(ids) > len(held_scan) else full.where(job_among(ids)),
    )
    queued = await cache.queued_rows.read(
        conn,
        await _pending_rows(conn, JOB_STAMPS, cache, window),
        lambda ids: base.where(job_among(ids)),
    )
    avoided = await _gang_failures(conn, cluster_names)
    new = [h.row for h in held if h.derived is None]
    await cache.load(conn, [form_key(r) for r in new], [(r.id, r.epoch, r.revision) for r in new])
    remodel = [
        q.row
        for q in queued
        if q.derived is None or q.derived.avoided != avoided.get(q.row.id, frozenset())
    ]
    await cache.load(conn, [form_key(r) for r in remodel], [])
    result = Read(Snapshot(), [], {}, cluster_ids)

    def model(row: Any) -> Job | None:
        """The core job of a row, its run times aside (None: it cannot be modeled)."""
        facts = JobFacts(
            id=str(row.id),
            queue=f"{row.tenant}/{row.queue}",
            priority=row.priority,
            preemptible=row.preemptible,
            created_at=_seconds(row.queued_at),
            avoided_clusters=avoided.get(row.id, frozenset()),
        )
        try:
            compiled, tasks = cache.get(form_key(row), row.replica_cap)
        except ValueError as exc:
            result.invalid[facts.id] = str(exc)
            return None
        return core_job(compiled, facts, tasks)

    def timed(job: Job, row: Any) -> Job:
        """`job` with the run times of its row as of `now`, where the core reads them (a
        copy per running job and cycle: 9 % of the loop's CPU under the fleet benchmark)."""
        if not job.run_times_matter:
            return job
        runtime = _run_time(row, now)
        since = max(0.0, now - _seconds(row.checkpointed_at)) if row.checkpointed_at else None
        if runtime == 0.0 and since is None:
            return job
        return replace(job, runtime_s=runtime, since_checkpoint_s=since)

    def modeled(row: Any, cluster: str) -> Placement | None:
        """The placement on `cluster` a held row (joined with its active placement) models,
        run times aside."""
        job = model(row)
        if job is None:
            return None
        job, flavors, replicas = cache.placement(row.id, row.epoch, row.revision, job)
        return Placement(
            job=job,
            cluster=cluster,
            flavors=flavors,
            replicas=replicas,
            epoch=row.epoch,
        )

    def named(cluster_id: uuid.UUID | None) -> str:
        return cluster_names.get(cluster_id, "") if cluster_id is not None else ""

    def held_model(row: Any) -> HeldModel:
        """What is derived from a held row (joined with its active placement)."""
        cluster = named(row.cluster_id)
        placement = modeled(row, cluster)
        return HeldModel(
            job_ref(row, row.revision),
            row.cluster_id,
            cluster,
            placement,
            result.invalid.get(str(row.id)),
            placement is not None and placement.job.elastic,
            row.state in UNCOUNTED_STATES,
            row.state == "Preempting",
        )

    def record(derived: HeldModel | QueuedModel) -> None:
        """Give the writer the job's ref, and say why it cannot be modeled if it cannot."""
        result.refs[derived.ref.key] = derived.ref
        if derived.invalid is not None:
            result.invalid[derived.ref.key] = derived.invalid

    placed: list[Placement] = []
    reservations: list[Placement] = []
    elastic: dict[tuple[uuid.UUID, int], Placement] = {}  # counted ones, by (job id, epoch)
    preempting: set[str] = set()
    renamed = cluster_names != cache.cluster_names  # a cluster came, went or was renamed
    cache.cluster_names = cluster_names
    for h in held:  # every held job, every cycle: what is asked of an unchanged one is kept
        derived = h.derived
        if derived is None or (renamed and derived.cluster != named(derived.cluster_id)):
            derived = h.derived = held_model(h.row)
        record(derived)
        placement = derived.placement
        if placement is None:
            continue
        job = timed(placement.job, h.row)
        if job is not placement.job:
            placement = replace(placement, job=job)
        placed.append(placement)
        if derived.reservation:
            reservations.append(placement)
        elif derived.elastic:
            elastic[(derived.ref.id, derived.ref.epoch)] = placement
        if derived.preempting:
            preempting.add(placement.job.id)
    reservations += await _not_reported(conn, elastic)
    for q in queued:
        row, known = q.row, q.derived
        gang_failed = avoided.get(row.id, frozenset())
        if known is None or known.avoided != gang_failed:
            core = model(row)
            invalid = result.invalid.get(str(row.id))
            known = q.derived = QueuedModel(job_ref(row), gang_failed, core, invalid)
        record(known)
        if known.job is not None:
            result.pending.append(timed(known.job, row))
    cache.prune(itertools.chain((h.row.id for h in held), (q.row.id for q in queued)))
    result.snapshot = Snapshot(
        clusters=tuple(fleet),
        queues=tuple(queue_list),
        placements=tuple(placed),
        reservations=tuple(reservations),
        preempting=frozenset(preempting),
    )
    return result
