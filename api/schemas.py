"""Request and response bodies of the REST API (besides the job manifest itself)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
)

from federation.catalog import Vendor
from federation.k8s_names import DnsLabel, label_map
from federation.store.tokens import DEFAULT_TTL_S
from federation.validation import INT32_MAX, INT64_MAX, NUL_FREE
from federation.wire.agent import PodPhase

JOB_STATES = (
    "Queued",
    "Placed",
    "Dispatched",
    "Running",
    "Preempting",
    "Succeeded",
    "Failed",
    "Cancelled",
)
JobState = Literal[
    "Queued", "Placed", "Dispatched", "Running", "Preempting", "Succeeded", "Failed", "Cancelled"
]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _query_int(value: object) -> object:
    """A query parameter's text as an integer: ASCII digits only, no sign, space or `_`."""
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit() and len(value) <= 20):
            raise ValueError("must be a whole number written in ASCII digits")
        return int(value)
    return value


def _query_float(value: object) -> object:
    """A query parameter's text as a number: ASCII `digits[.digits]`, nothing else."""
    if isinstance(value, str):
        whole, _, frac = value.partition(".")
        if not all(p.isascii() and p.isdigit() and len(p) <= 20 for p in (whole, frac or "0")):
            raise ValueError("must be a number written as ASCII digits[.digits]")
        return float(value)
    return value


# bounds go on each field (a `Field` inside `Annotated` would override the field's own `le`)
QueryInt = Annotated[int, BeforeValidator(_query_int)]
QueryFloat = Annotated[float, BeforeValidator(_query_float)]


class _Out(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


QuotaResource = Annotated[
    str,
    StringConstraints(
        max_length=128, pattern=r"^(cpu|memory|compute|[a-z0-9-]+/[A-Za-z0-9.*_+-]+)$"
    ),
]


class QuotaEntry(_In):
    """Nominal quota of one resource and how much more the queue may borrow from its cohort."""

    nominal: int = Field(ge=0, le=10**15)
    borrowing_limit: int | None = Field(default=None, alias="borrowingLimit", ge=0, le=10**15)


class TenantIn(_In):
    """A tenant to create."""

    name: DnsLabel
    display_name: Annotated[str, StringConstraints(max_length=256), NUL_FREE] = Field(
        default="", alias="displayName"
    )


class TenantOut(_Out):
    """A tenant."""

    id: uuid.UUID
    name: str
    display_name: str = Field(alias="displayName")
    created_at: datetime = Field(alias="createdAt")


class TenantList(_Out):
    """Tenants."""

    items: list[TenantOut]


class QueueIn(_In):
    """A queue to create."""

    name: DnsLabel
    cohort: DnsLabel | None = None
    weight: float = Field(default=1.0, gt=0, le=1000)
    quota: dict[QuotaResource, QuotaEntry] = Field(default_factory=dict, max_length=64)


class QueuePatch(_In):
    """Changes to a queue; `version` (if given) must match the current one."""

    cohort: DnsLabel | None = None
    weight: float | None = Field(default=None, gt=0, le=1000)
    quota: dict[QuotaResource, QuotaEntry] | None = Field(default=None, max_length=64)
    version: int | None = Field(default=None, ge=1, le=INT32_MAX)


class QueueOut(_Out):
    """A queue with its usage against quota."""

    id: uuid.UUID
    tenant: str
    name: str
    cohort: str | None
    weight: float
    quota: dict[str, dict[str, int | None]]
    usage: dict[str, int] = Field(default_factory=dict)
    jobs: dict[str, int] = Field(default_factory=dict, description="job counts by state")
    fair_share: float = Field(
        alias="fairShare",
        description="the queue's largest share of a resource of its cohort (of its own nominal"
        " quota without a cohort), divided by its weight: among equal priorities the scheduler"
        " serves the queue with the lowest first",
    )
    version: int
    created_at: datetime = Field(alias="createdAt")


class QueueList(_Out):
    """Queues."""

    items: list[QueueOut]


class WaitingJob(_Out):
    """A queued job and its place in its queue."""

    position: int = Field(description="1 is the next job the scheduler takes from this queue")
    id: uuid.UUID
    name: str
    priority: int
    priority_class: str = Field(alias="priorityClass")
    reason: str
    created_at: datetime = Field(alias="createdAt")


class WaitingList(_Out):
    """A queue's waiting jobs in the order the scheduler takes them (priority, then age)."""

    items: list[WaitingJob]


class WaitingQuery(_In):
    """How many waiting jobs to list."""

    limit: QueryInt = Field(default=100, ge=1, le=1000)


MAX_TTL_S = 3650 * 86400
TokenTtl = Annotated[
    int,
    Field(
        alias="ttlSeconds",
        ge=60,
        le=MAX_TTL_S,
        description=f"seconds until the token expires (default {DEFAULT_TTL_S}: 90 days)",
    ),
]


class TokenIn(_In):
    """A token to issue."""

    name: DnsLabel
    role: Literal["admin", "member", "viewer", "agent"]
    tenant: DnsLabel | None = Field(default=None, description="required for role member")
    cluster: DnsLabel | None = Field(default=None, description="required for role agent")
    ttl_seconds: TokenTtl = DEFAULT_TTL_S


class TokenRotateIn(_In):
    """How to rotate a token: the successor's lifetime (default: the old token's, or 90 days
    for one that never expires), and how long the old token lives on."""

    ttl_seconds: int | None = Field(
        default=None,
        alias="ttlSeconds",
        ge=60,
        le=MAX_TTL_S,
        description="seconds until the successor expires (default: the old token's lifetime)",
    )
    overlap_seconds: int | None = Field(
        default=None,
        alias="overlapSeconds",
        ge=0,
        le=MAX_TTL_S,
        description="the old token expires this long after rotation (default: at its own"
        " expiry, or when revoked)",
    )


class TokenOut(_Out):
    """An issued token; `token` is shown only once, at issue or rotation."""

    id: uuid.UUID
    name: str
    role: str
    token: str | None = None
    expires_at: datetime | None = Field(
        default=None, alias="expiresAt", description="null: never (the bootstrap token)"
    )
    revoked_at: datetime | None = Field(default=None, alias="revokedAt")
    rotated_from: uuid.UUID | None = Field(
        default=None, alias="rotatedFrom", description="the token this one succeeds"
    )


class BootstrapTokenIn(_In):
    """How long a cluster's bootstrap token stays valid (it is single-use in any case)."""

    ttl_seconds: int = Field(default=3600, ge=60, le=7 * 86400, alias="ttlSeconds")


class BootstrapTokenOut(_Out):
    """A bootstrap token; `token` is shown only here, once."""

    id: uuid.UUID
    cluster: str
    token: str
    expires_at: datetime = Field(alias="expiresAt")


class Whoami(_Out):
    """The calling user (not an agent): role, tenant and, for an OIDC user, the subject."""

    role: Literal["admin", "member", "viewer"]
    tenant: str | None = Field(description="the tenant a member or viewer is bound to")
    subject: str | None = Field(default=None, description="the OIDC subject (null: API token)")


class ConsoleOidc(_Out):
    """How the console signs a user in at the OIDC provider: authorization code with PKCE as
    the public client `clientId`, redirecting back to `/ui`; it presents the token whose
    audience is `audience`."""

    issuer: str
    client_id: str = Field(alias="clientId")
    scopes: list[str]
    audience: str
    authorization_endpoint: str = Field(alias="authorizationEndpoint")
    token_endpoint: str = Field(alias="tokenEndpoint")


class ConsoleSettings(_Out):
    """How the web console signs users in: always with an API token; with the OIDC provider
    where the hub names a console client (null: not configured)."""

    oidc: ConsoleOidc | None


class TokenList(_Out):
    """Issued tokens (never their secrets)."""

    items: list[TokenOut]


class JobOut(_Out):
    """A job and where it stands."""

    id: uuid.UUID
    name: str
    tenant: str
    queue: str
    state: JobState
    reason: str
    priority: int
    priority_class: str = Field(alias="priorityClass")
    preemptible: bool
    labels: dict[str, str]
    cluster: str | None
    epoch: int
    version: int
    spec: dict[str, Any]
    created_at: datetime = Field(alias="createdAt")
    updated_at: datetime = Field(alias="updatedAt")
    started_at: datetime | None = Field(alias="startedAt")
    finished_at: datetime | None = Field(alias="finishedAt")
    checkpointed_at: datetime | None = Field(
        default=None, alias="checkpointedAt", description="the last checkpoint it reported"
    )


class ReplicaFailureOut(_Out):
    """How an earlier attempt of a replica ended."""

    attempt: int
    pod: str
    node: str
    exit_code: int | None = Field(alias="exitCode")
    reason: str
    message: str


class ReplicaOut(_Out):
    """One replica's latest pod (attempt) as its cluster last reported it."""

    task: str
    replica: int
    attempt: int = Field(description="runs of this replica in its placement, 1 and up")
    pod: str
    node: str
    phase: PodPhase
    exit_code: int | None = Field(alias="exitCode")
    reason: str = Field(description="OOMKilled, Error, Evicted, ImagePullBackOff, NodeLost, ...")
    restarts: int
    message: str
    last_failure: ReplicaFailureOut | None = Field(
        alias="lastFailure", description="the failure of the attempt this one replaced"
    )
    updated_at: datetime = Field(alias="updatedAt")


class ElasticTaskOut(_Out):
    """An elastic task's replica bounds and the replicas its placement holds now."""

    task: str
    replicas: int | None = Field(
        description="replicas its current placement holds (null: the job is not placed)"
    )
    min_replicas: int = Field(alias="minReplicas")
    max_replicas: int = Field(alias="maxReplicas")


class JobDetail(JobOut):
    """A job with its replicas (of its current or last placement) and attempts."""

    attempts: int = Field(
        description="runs of the job: one per placement whose pods ran, plus each run again "
        "in place of a failed replica"
    )
    replicas: list[ReplicaOut]
    elastic: list[ElasticTaskOut] = Field(
        default_factory=list,
        description="each elastic task's current, minimum and maximum replicas (the hub "
        "resizes it between them)",
    )


MAX_BATCH = 1000


class BatchItem(_In):
    """One job of a batch: its manifest (as for `POST /v1/jobs`) and its idempotency key."""

    idempotency_key: str | None = Field(
        default=None, alias="idempotencyKey", pattern=r"^[!-~]{1,128}$"
    )
    manifest: dict[str, Any] = Field(description="a job manifest, as for POST /v1/jobs")


class JobBatch(_In):
    """Many jobs in one request (parameter sweeps); each is accepted or refused on its own."""

    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH)


class BatchOutcome(_Out):
    """What became of one item: 201 (queued), 200 (a repeat of its key) or a 4xx problem."""

    status: int
    job: JobOut | None = None
    problem: dict[str, Any] | None = None


class JobBatchResult(_Out):
    """The outcome of every item, in the request's order."""

    items: list[BatchOutcome]


class JobList(_Out):
    """A page of jobs."""

    items: list[JobOut]
    next_cursor: str | None = Field(alias="nextCursor")


def _label_selector(value: str) -> str:
    """`k=v[,k=v]` where every pair is a valid label (a selector for nothing else matches)."""
    label_map(dict(pair.partition("=")[::2] for pair in value.split(",")))
    return value


class JobQuery(_In):
    """Filters and paging of the job list."""

    tenant: DnsLabel | None = None
    queue: DnsLabel | None = None
    state: (
        Annotated[
            str,
            StringConstraints(
                max_length=256,
                pattern=r"^(" + "|".join(JOB_STATES) + r")(,(" + "|".join(JOB_STATES) + r"))*$",
            ),
        ]
        | None
    ) = Field(default=None, description="comma-separated states")
    label: (
        Annotated[
            str,
            StringConstraints(
                max_length=4096, pattern=r"^[^=,\x00]+=[^=,\x00]*(,[^=,\x00]+=[^=,\x00]*)*$"
            ),
            AfterValidator(_label_selector),
        ]
        | None
    ) = Field(default=None, description="k=v[,k=v]: jobs carrying all these labels")
    vendor: DnsLabel | None = Field(
        default=None, description="jobs that accept a device of this vendor (e.g. huawei)"
    )
    cluster: DnsLabel | None = Field(default=None, description="jobs placed on this cluster")
    limit: QueryInt = Field(default=50, ge=1, le=500)
    cursor: Annotated[str, StringConstraints(max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] | None = (
        None
    )


class EventOut(_Out):
    """An event."""

    id: int
    kind: str
    reason: str
    message: str
    data: dict[str, Any]
    created_at: datetime = Field(alias="createdAt")


class EventList(_Out):
    """Events of a job, oldest first."""

    items: list[EventOut]


class EventQuery(_In):
    """Paging of events."""

    after: QueryInt = Field(default=0, ge=0, le=INT64_MAX)
    limit: QueryInt = Field(default=100, ge=1, le=1000)


class ClusterReason(_Out):
    """Why a job does not fit one cluster."""

    cluster: str
    code: str
    reason: str


class Explanation(_Out):
    """Why a job is where it is; for a waiting job, per cluster, the first failing check."""

    job: uuid.UUID
    state: str
    summary: str
    clusters: list[ClusterReason]


class FlavorCapacity(_Out):
    """Devices of one flavor in a cluster."""

    flavor: str
    vendor: str
    total: int
    healthy: int
    allocated_milli: int = Field(alias="allocatedMilli")
    free_whole: int = Field(alias="freeWhole")
    reporting: int = Field(default=0, description="devices whose exporter the agent reads")
    utilization: float | None = Field(
        default=None, description="mean live utilization (percent) of the reporting devices"
    )
    temperature_max_c: float | None = Field(
        default=None, alias="temperatureMaxC", description="hottest reporting device"
    )


class ClusterOut(_Out):
    """A member cluster with capacity and use."""

    name: str
    region: str
    zone: str
    labels: dict[str, str]
    state: str
    accepted: bool = Field(
        description="accepted by an administrator or the auto-accept policy: only then it gets work"
    )
    cordoned: bool
    draining: bool
    kubernetes_version: str = Field(alias="kubernetesVersion")
    agent_version: str = Field(alias="agentVersion")
    last_heartbeat: datetime | None = Field(alias="lastHeartbeat")
    apiserver_problem: str | None = Field(
        default=None,
        alias="apiserverProblem",
        description="why the agent cannot reach its kube-apiserver (null: it can)",
    )
    nodes: int
    ready_nodes: int = Field(alias="readyNodes")
    cpu_milli: int = Field(alias="cpuMilli")
    cpu_milli_used: int = Field(alias="cpuMilliUsed")
    memory_mib: int = Field(alias="memoryMib")
    memory_mib_used: int = Field(alias="memoryMibUsed")
    flavors: list[FlavorCapacity]


class ClusterList(_Out):
    """Member clusters."""

    items: list[ClusterOut]


class AllocationSample(_Out):
    """One cluster's devices of one flavor at one time."""

    taken_at: datetime = Field(alias="takenAt")
    cluster: str
    flavor: str
    total: int
    healthy: int
    allocated_milli: int = Field(alias="allocatedMilli")


class AllocationHistory(_Out):
    """Allocation samples, oldest first, taken every `intervalSeconds` and kept for
    `keepSeconds` by the hub."""

    interval_seconds: float = Field(alias="intervalSeconds")
    keep_seconds: float = Field(alias="keepSeconds")
    items: list[AllocationSample]


def _vendor(value: str) -> str:
    known = [v.value for v in Vendor]
    if value not in known:
        raise ValueError(f"expected one of {', '.join(known)}")
    return value


class TelemetryQuery(_In):
    """Which devices to show."""

    cluster: DnsLabel | None = None
    vendor: Annotated[str, AfterValidator(_vendor)] | None = Field(
        default=None, description="a catalog vendor, e.g. nvidia"
    )


class DeviceTelemetryOut(_Out):
    """One device: where it is, its allocation and health, and its latest exporter reading
    (null where none was reported)."""

    cluster: str
    region: str
    node: str
    flavor: str
    vendor: str
    index: int
    healthy: bool
    allocated_milli: int = Field(alias="allocatedMilli")
    memory_mib: int = Field(alias="memoryMib")
    utilization: float | None = Field(description="percent")
    memory_used_mib: int | None = Field(alias="memoryUsedMib")
    temperature_c: float | None = Field(alias="temperatureC")
    fault: str = Field(description="the fatal reading that took it out of service, or empty")
    reported_at: datetime | None = Field(alias="reportedAt")


class TelemetryList(_Out):
    """Devices with their live telemetry."""

    items: list[DeviceTelemetryOut]


class HistoryQuery(_In):
    """How far back to read allocation history."""

    seconds: QueryInt = Field(default=3600, ge=1, le=90 * 86400, description="the last N seconds")


class Health(_Out):
    """Liveness of the hub."""

    status: Literal["ok"]
    version: str


class ServiceOut(_Out):
    """A service: the replicas the hub wants of it now and its template's generation."""

    id: uuid.UUID
    name: str
    tenant: str
    queue: str
    state: Literal["Active", "Deleted"]
    priority: int
    priority_class: str = Field(alias="priorityClass")
    preemptible: bool
    labels: dict[str, str]
    desired: int = Field(description="replicas wanted across all its clusters now")
    generation: int = Field(description="of the server's pods: an update that changes them adds 1")
    version: int
    spec: dict[str, Any]
    created_at: datetime = Field(alias="createdAt")
    updated_at: datetime = Field(alias="updatedAt")
    deleted_at: datetime | None = Field(alias="deletedAt")


class ServiceList(_Out):
    """A page of services."""

    items: list[ServiceOut]
    next_cursor: str | None = Field(alias="nextCursor")


class ServiceQuery(_In):
    """Filters and paging of the service list."""

    tenant: DnsLabel | None = None
    state: Literal["Active", "Deleted"] = Field(
        default="Active", description="live services, or deleted ones"
    )
    limit: QueryInt = Field(default=50, ge=1, le=500)
    cursor: Annotated[str, StringConstraints(max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] | None = (
        None
    )


class ShardOut(_Out):
    """One live shard of a service: a job confined to one cluster."""

    job: uuid.UUID
    name: str
    cluster: str | None = Field(description="where its active placement is (null: waiting)")
    state: JobState
    held: int = Field(description="replicas its placement holds")
    cap: int | None = Field(description="the most replicas the service controller lets it hold")
    ready: int = Field(description="replicas ready, as its cluster last reported")
    updated: int = Field(description="ready replicas of the shard's generation")
    generation: int


class AutoscalingStatus(_Out):
    """The scaling metric: the latest average per replica read, and the target."""

    metric: str
    target: float
    average: float | None = Field(description="sum over the replicas read / replicas read")
    sampled: int = Field(description="replicas whose metric was read in the latest reports")
    min_replicas: int = Field(alias="minReplicas")
    max_replicas: int = Field(alias="maxReplicas")


class ServiceDetail(ServiceOut):
    """A service with its live shards, readiness, autoscaling status and recent events."""

    ready: int = Field(description="replicas ready across its shards")
    autoscaling: AutoscalingStatus | None = Field(description="null: a fixed replica count")
    shards: list[ShardOut]
    events: list[EventOut] = Field(description="its latest events, oldest first")


class EndpointPortOut(_Out):
    """A port of a shard's Service."""

    name: str
    port: int
    protocol: str


class EndpointOut(_Out):
    """Where one shard serves, as its cluster last reported: its Kubernetes Service."""

    shard: str
    job: uuid.UUID
    cluster: str
    region: str
    address: str = Field(description="<service>.<namespace>.svc.cluster.local")
    cluster_ip: str = Field(alias="clusterIP")
    ports: list[EndpointPortOut]
    ready: int
    updated: int = Field(description="ready replicas of the current generation")
    generation: int
    reported_at: datetime = Field(alias="reportedAt")


class EndpointList(_Out):
    """Each live shard's endpoint (shards not reported yet are left out)."""

    items: list[EndpointOut]
