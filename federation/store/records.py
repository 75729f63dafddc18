"""Typed rows the store returns (plain frozen values, no connection attached)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

Role = Literal["admin", "member", "viewer", "agent"]


@dataclass(frozen=True)
class Principal:
    """Who is calling: an API token (`token_id`) or an OIDC user (`subject`), the role and
    what it is bound to, and when the credential expires (None: never)."""

    token_id: uuid.UUID | None
    role: Role
    tenant_id: uuid.UUID | None = None
    cluster_id: uuid.UUID | None = None
    expires_at: datetime | None = None
    subject: str | None = None

    @property
    def actor(self) -> str:
        """Who acts, as the audit trail and the rate limits name it: the token's id, or
        `oidc:<subject>` for a user signed in through the OpenID Connect provider."""
        return f"oidc:{self.subject}" if self.subject is not None else str(self.token_id)

    def expired(self, now: datetime) -> bool:
        """Whether the credential is no longer valid at `now`."""
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True)
class Tenant:
    """A tenant: owns queues and jobs."""

    id: uuid.UUID
    name: str
    display_name: str
    policy: dict[str, bool]  # a TenantPolicy's JSON
    created_at: datetime


@dataclass(frozen=True)
class Queue:
    """A queue of one tenant with its quota, cohort and fair-share weight."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    tenant: str
    name: str
    cohort: str | None
    weight: float
    quota: dict[str, dict[str, int | None]]
    version: int
    created_at: datetime


@dataclass(frozen=True)
class Job:
    """A job row with its identifying names resolved."""

    id: uuid.UUID
    seq: int
    tenant_id: uuid.UUID
    tenant: str
    queue_id: uuid.UUID
    queue: str
    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    state: str
    priority: int
    priority_class: str
    preemptible: bool
    reason: str
    pending_reasons: dict[str, Any]
    cluster: str | None
    epoch: int
    placement_failures: int
    not_before: datetime | None
    version: int
    queued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    checkpointed_at: datetime | None
    created_at: datetime
    updated_at: datetime
    service_id: uuid.UUID | None = None  # a service's shard: its service
    replica_cap: int | None = None  # a shard: the most replicas its service lets it hold


@dataclass(frozen=True)
class Service:
    """A service row with its tenant and queue named (`compiled`: its CompiledJob's JSON)."""

    id: uuid.UUID
    seq: int
    tenant_id: uuid.UUID
    tenant: str
    queue_id: uuid.UUID
    queue: str
    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    compiled: dict[str, Any]
    priority: int
    priority_class: str
    preemptible: bool
    state: str  # Active | Deleted
    desired: int
    generation: int
    version: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None


@dataclass(frozen=True)
class Event:
    """Something that happened to a job, cluster or service."""

    id: int
    job_id: uuid.UUID | None
    cluster_id: uuid.UUID | None
    kind: str
    reason: str
    message: str
    data: dict[str, Any]
    created_at: datetime
    service_id: uuid.UUID | None = None
