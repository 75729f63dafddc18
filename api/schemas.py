"""Request and response bodies of the REST API (besides the job manifest itself)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from federation.spec import DnsLabel

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
    model_config = ConfigDict(extra="forbid", frozen=True)


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
    display_name: str = Field(default="", alias="displayName", max_length=256)


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
    version: int | None = Field(default=None, ge=1)


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
    version: int
    created_at: datetime = Field(alias="createdAt")


class QueueList(_Out):
    """Queues."""

    items: list[QueueOut]


class TokenIn(_In):
    """A token to issue."""

    name: DnsLabel
    role: Literal["admin", "member", "viewer", "agent"]
    tenant: DnsLabel | None = Field(default=None, description="required for role member")
    cluster: DnsLabel | None = Field(default=None, description="required for role agent")


class TokenOut(_Out):
    """An issued token; `token` is shown only once, at issue."""

    id: uuid.UUID
    name: str
    role: str
    token: str | None = None


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


class JobList(_Out):
    """A page of jobs."""

    items: list[JobOut]
    next_cursor: str | None = Field(alias="nextCursor")


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
            str, StringConstraints(max_length=512, pattern=r"^[^=,]+=[^=,]*(,[^=,]+=[^=,]*)*$")
        ]
        | None
    ) = Field(default=None, description="k=v[,k=v]: jobs carrying all these labels")
    limit: int = Field(default=50, ge=1, le=500)
    cursor: Annotated[str, StringConstraints(max_length=64)] | None = None


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

    after: int = Field(default=0, ge=0)
    limit: int = Field(default=100, ge=1, le=1000)


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


class ClusterOut(_Out):
    """A member cluster with capacity and use."""

    name: str
    region: str
    zone: str
    labels: dict[str, str]
    state: str
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


class Health(_Out):
    """Liveness of the hub."""

    status: Literal["ok"]
    version: str
