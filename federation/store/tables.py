"""The hub's schema as SQLAlchemy Core tables: the single source for queries and migrations."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    MetaData,
    Sequence,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _created() -> Column[object]:
    return Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now())


# global change counter of placements: agents resume their assignment stream from a revision
placement_revision = Sequence("placement_revision_seq", metadata=metadata)

tenants = Table(
    "tenants",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")),
    Column("name", String(63), nullable=False, unique=True),
    Column("display_name", String(256), nullable=False, server_default=""),
    Column("policy", JSONB, nullable=False, server_default=text("'{}'::jsonb")),  # TenantPolicy
    _created(),
)

queues = Table(
    "queues",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")),
    Column("tenant_id", ForeignKey("tenants.id", ondelete="RESTRICT"), nullable=False),
    Column("name", String(63), nullable=False),
    Column("cohort", String(63), nullable=True),
    Column("weight", Float, nullable=False, server_default="1"),
    # {"<resource>": {"nominal": int, "borrowingLimit": int | null}}; see docs/user-guide.md
    Column("quota", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("version", Integer, nullable=False, server_default="1"),
    _created(),
    UniqueConstraint("tenant_id", "name"),
)

priority_classes = Table(
    "priority_classes",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("value", Integer, nullable=False),
    Column("preemptible_default", Boolean, nullable=False, server_default="false"),
    Column("description", Text, nullable=False, server_default=""),
)

clusters = Table(
    "clusters",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")),
    Column("name", String(63), nullable=False, unique=True),
    Column("region", String(63), nullable=False, server_default=""),
    Column("zone", String(63), nullable=False, server_default=""),
    Column("labels", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("state", String(16), nullable=False, server_default="Pending"),
    Column("cordoned", Boolean, nullable=False, server_default="false"),
    Column("draining", Boolean, nullable=False, server_default="false"),
    Column("kubernetes_version", String(64), nullable=False, server_default=""),
    Column("agent_version", String(64), nullable=False, server_default=""),
    Column("last_heartbeat", DateTime(timezone=True), nullable=True),
    # what the agent last said of its kube-apiserver: None (reachable) or why not, since when
    Column("apiserver_problem", String(512), nullable=True),
    Column("unreachable_since", DateTime(timezone=True), nullable=True),
    Column("inventory_generation", BigInteger, nullable=False, server_default="0"),
    # when the agent last reported device telemetry (the loop re-reads the cluster's nodes)
    Column("telemetry_at", DateTime(timezone=True), nullable=True),
    # an administrator (or the auto-accept policy) accepted it: only then does it get work
    Column("accepted", Boolean, nullable=False, server_default="false"),
    Column("version", Integer, nullable=False, server_default="1"),
    _created(),
)

nodes = Table(
    "nodes",
    metadata,
    Column("cluster_id", ForeignKey("clusters.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(253), primary_key=True),
    Column("labels", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("taints", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("ready", Boolean, nullable=False, server_default="true"),
    Column("unschedulable", Boolean, nullable=False, server_default="false"),
    Column("cpu_milli", BigInteger, nullable=False, server_default="0"),
    Column("cpu_milli_used", BigInteger, nullable=False, server_default="0"),
    Column("memory_mib", BigInteger, nullable=False, server_default="0"),
    Column("memory_mib_used", BigInteger, nullable=False, server_default="0"),
    Column("pods", Integer, nullable=False, server_default="110"),
    Column("pods_used", Integer, nullable=False, server_default="0"),
    Column("generation", BigInteger, nullable=False, server_default="0"),
)

devices = Table(
    "devices",
    metadata,
    Column("cluster_id", UUID(as_uuid=True), primary_key=True),
    Column("node_name", String(253), primary_key=True),
    Column("flavor", String(128), primary_key=True),
    Column("index", Integer, primary_key=True),
    Column("memory_mib", BigInteger, nullable=False),
    Column("healthy", Boolean, nullable=False, server_default="true"),
    Column("used_milli", Integer, nullable=False, server_default="0"),
    Column("used_memory_mib", BigInteger, nullable=False, server_default="0"),
    CheckConstraint("used_milli BETWEEN 0 AND 1000", name="used_milli_range"),
    ForeignKeyConstraint(
        ["cluster_id", "node_name"], ["nodes.cluster_id", "nodes.name"], ondelete="CASCADE"
    ),
)

# The latest exporter reading of each device (federation/wire/telemetry.py). No foreign key to
# `devices`: those rows are rewritten by every inventory report, the readings outlive that.
device_telemetry = Table(
    "device_telemetry",
    metadata,
    Column("cluster_id", ForeignKey("clusters.id", ondelete="CASCADE"), primary_key=True),
    Column("node_name", String(253), primary_key=True),
    Column("flavor", String(128), primary_key=True),
    Column("index", Integer, primary_key=True),
    Column("utilization", Float, nullable=True),  # percent
    Column("memory_used_mib", BigInteger, nullable=True),
    Column("memory_total_mib", BigInteger, nullable=True),
    Column("temperature_c", Float, nullable=True),
    Column("fault", String(256), nullable=False, server_default=""),  # "": no fatal error
    Column("reported_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")),
    Column("name", String(63), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("role", String(16), nullable=False),
    Column("tenant_id", ForeignKey("tenants.id", ondelete="CASCADE"), nullable=True),
    Column("cluster_id", ForeignKey("clusters.id", ondelete="CASCADE"), nullable=True),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("expires_at", DateTime(timezone=True), nullable=True),  # NULL: never (bootstrap)
    Column("rotated_from", ForeignKey("api_tokens.id", ondelete="SET NULL"), nullable=True),
    _created(),
    CheckConstraint("role IN ('admin', 'member', 'viewer', 'agent')", name="role_known"),
    CheckConstraint("role <> 'member' OR tenant_id IS NOT NULL", name="member_has_tenant"),
    CheckConstraint("role <> 'agent' OR cluster_id IS NOT NULL", name="agent_has_cluster"),
)

# Single-use tokens an agent exchanges once for its cluster's credential (docs/operator-guide.md,
# "Registering a cluster"); stored as SHA-256 digests.
bootstrap_tokens = Table(
    "bootstrap_tokens",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")),
    Column("cluster_id", ForeignKey("clusters.id", ondelete="CASCADE"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True), nullable=True),
    _created(),
)

# Per-cluster agent credentials issued at registration and renewed by the agent before expiry.
cluster_credentials = Table(
    "cluster_credentials",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")),
    Column("cluster_id", ForeignKey("clusters.id", ondelete="CASCADE"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    _created(),
    Index("ix_cluster_credentials_cluster_id", "cluster_id"),
)

# Long-running services (`kind: Service`): what was asked for and how many replicas the hub
# wants now. Each runs as shard jobs (`jobs.service_id`), one per cluster it occupies; the
# service controller (federation/controllers/services.py) opens, sizes and closes them.
services = Table(
    "services",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("seq", BigInteger, Identity(), nullable=False, unique=True),
    Column("tenant_id", ForeignKey("tenants.id", ondelete="RESTRICT"), nullable=False),
    Column("queue_id", ForeignKey("queues.id", ondelete="RESTRICT"), nullable=False),
    Column("name", String(63), nullable=False),
    Column("labels", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("spec", JSONB, nullable=False),  # the manifest as submitted (or last updated)
    Column("compiled", JSONB, nullable=False),  # CompiledJob with `service`, shards copy it
    Column("priority", Integer, nullable=False),
    Column("priority_class", String(63), nullable=False),
    Column("preemptible", Boolean, nullable=False),
    Column("state", String(16), nullable=False, server_default="Active"),  # Active | Deleted
    Column("desired", Integer, nullable=False),  # replicas wanted across all shards
    Column("generation", Integer, nullable=False, server_default="1"),  # of the template
    Column("idempotency_key", String(128), nullable=True),
    Column("request_hash", String(64), nullable=True),
    Column("version", Integer, nullable=False, server_default="1"),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("deleted_at", DateTime(timezone=True), nullable=True),
    _created(),
    UniqueConstraint("tenant_id", "idempotency_key"),
    Index(
        "ux_services_tenant_name",
        "tenant_id",
        "name",
        unique=True,
        postgresql_where=text("deleted_at IS NULL"),
    ),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("seq", BigInteger, Identity(), nullable=False, unique=True),
    Column("tenant_id", ForeignKey("tenants.id", ondelete="RESTRICT"), nullable=False),
    Column("queue_id", ForeignKey("queues.id", ondelete="RESTRICT"), nullable=False),
    Column("name", String(63), nullable=False),
    Column("labels", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("spec", JSONB, nullable=False),  # the manifest as submitted
    # federation.compiled.CompiledJob: the one form everything after the API reads
    Column("compiled", JSONB, nullable=True),
    Column("state", String(16), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("priority_class", String(63), nullable=False),
    Column("preemptible", Boolean, nullable=False),
    Column("reason", Text, nullable=False, server_default=""),
    # per-cluster explanation of why the job waits, written by the scheduling loop
    Column("pending_reasons", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("cluster_id", ForeignKey("clusters.id", ondelete="SET NULL"), nullable=True),
    Column("epoch", BigInteger, nullable=False, server_default="0"),
    # placements the cluster could not start (gang timeout): re-placement backs off, then fails
    Column("placement_failures", Integer, nullable=False, server_default="0"),
    Column("not_before", DateTime(timezone=True), nullable=True),  # no re-placement before
    Column("idempotency_key", String(128), nullable=True),
    Column("request_hash", String(64), nullable=True),
    Column("version", Integer, nullable=False, server_default="1"),
    # age used for ordering; kept when a job is preempted and requeued
    Column("queued_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    # the last checkpoint the job reported (POST /v1/jobs/{id}/checkpoint): preemption cost
    Column("checkpointed_at", DateTime(timezone=True), nullable=True),
    # a service's shard: the service, and the most replicas the controller lets it hold now
    Column("service_id", ForeignKey("services.id", ondelete="CASCADE"), nullable=True),
    Column("replica_cap", Integer, nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    _created(),
    UniqueConstraint("tenant_id", "idempotency_key"),
    Index("ix_jobs_service_id", "service_id", postgresql_where=text("service_id IS NOT NULL")),
    Index("ix_jobs_state_priority", "state", "priority"),
    Index("ix_jobs_tenant_seq", "tenant_id", "seq"),
)

tasks = Table(
    "tasks",
    metadata,
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(63), primary_key=True),
    Column("replicas", Integer, nullable=False),
    Column("flavor", String(128), nullable=True),
    Column("running", Integer, nullable=False, server_default="0"),
    Column("succeeded", Integer, nullable=False, server_default="0"),
    Column("failed", Integer, nullable=False, server_default="0"),
)

placements = Table(
    "placements",
    metadata,
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("epoch", BigInteger, primary_key=True),
    Column("cluster_id", ForeignKey("clusters.id", ondelete="CASCADE"), nullable=False),
    # {"<task>": {"flavor": str | null, "replicas": [{"node": str, "devices": [int]}]}}
    Column("assignment", JSONB, nullable=False),
    Column("state", String(16), nullable=False, server_default="Active"),
    # global, monotonically increasing change counter agents resume from
    Column(
        "revision",
        BigInteger,
        placement_revision,
        nullable=False,
        server_default=placement_revision.next_value(),
    ),
    _created(),
    Column("released_at", DateTime(timezone=True), nullable=True),
    Index("ix_placements_cluster_revision", "cluster_id", "revision"),
)

# Each replica's latest pod as its cluster's agent last reported it, per placement (epoch):
# written set-wise with the status reports (federation/store/replicas.py), read by
# GET /v1/jobs/{id}. A table rather than a column of jobs or placements: a report rewrites only
# the replicas that changed, never the hot, versioned job row, and the previous row is at hand
# to tell what changed (the events).
replica_status = Table(
    "replica_status",
    metadata,
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("epoch", BigInteger, primary_key=True),
    Column("task", String(63), primary_key=True),
    Column("replica", Integer, primary_key=True),
    Column("attempt", Integer, nullable=False, server_default="1"),  # runs in place, 1 and up
    Column("pod", String(253), nullable=False),
    Column("node", String(253), nullable=False, server_default=""),
    Column("phase", String(16), nullable=False),
    Column("exit_code", Integer, nullable=True),
    Column("reason", String(63), nullable=False, server_default=""),
    Column("restarts", Integer, nullable=False, server_default="0"),
    Column("message", Text, nullable=False, server_default=""),
    Column("last", JSONB, nullable=True),  # the failure of the attempt this one replaced
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# A service shard as its cluster last reported it serving (`wire.agent.ServingStatus`): the
# endpoint a gateway routes to, readiness, and the scaling metric the autoscaler reads.
service_endpoints = Table(
    "service_endpoints",
    metadata,
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("epoch", BigInteger, nullable=False),
    Column("cluster_id", ForeignKey("clusters.id", ondelete="CASCADE"), nullable=False),
    Column("address", String(253), nullable=False),
    Column("cluster_ip", String(45), nullable=False, server_default=""),
    Column("ports", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("ready", Integer, nullable=False, server_default="0"),
    Column("updated", Integer, nullable=False, server_default="0"),
    Column("generation", Integer, nullable=False, server_default="1"),
    Column("metric_sum", Float, nullable=True),
    Column("sampled", Integer, nullable=False, server_default="0"),
    Column("reported_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

events = Table(
    "events",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), nullable=True),
    Column("service_id", ForeignKey("services.id", ondelete="CASCADE"), nullable=True),
    Column("cluster_id", ForeignKey("clusters.id", ondelete="CASCADE"), nullable=True),
    Column("kind", String(32), nullable=False),
    Column("reason", String(63), nullable=False),
    Column("message", Text, nullable=False, server_default=""),
    Column("data", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    _created(),
    Index("ix_events_job_id", "job_id", "id"),
    Index(
        "ix_events_service_id", "service_id", "id", postgresql_where=text("service_id IS NOT NULL")
    ),
)

# Devices and allocation per cluster and flavor, sampled by the leading hub replica at a fixed
# interval and kept for a bounded time (`history` in the hub configuration).
allocation_history = Table(
    "allocation_history",
    metadata,
    Column("taken_at", DateTime(timezone=True), nullable=False),
    Column("cluster", String(63), nullable=False),
    Column("flavor", String(128), nullable=False),
    Column("total", Integer, nullable=False),
    Column("healthy", Integer, nullable=False),
    Column("allocated_milli", BigInteger, nullable=False),
    Index("ix_allocation_history_taken_at", "taken_at"),
)

# Who did what through the API: every mutating and every refused request (api/audit.py), kept
# for a bounded time (`audit` in the hub configuration). No foreign keys: a record outlives the
# token, tenant or job it names.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("actor", String(128), nullable=True),  # token id or OIDC subject; None: anonymous
    Column("role", String(16), nullable=True),
    Column("tenant_id", UUID(as_uuid=True), nullable=True),
    Column("tenant", String(63), nullable=True),
    Column("action", String(96), nullable=False),  # method and operation: "POST submit_job"
    Column("object", String(256), nullable=True),
    Column("request_id", String(128), nullable=False),
    Column("source", String(64), nullable=False),
    Column("status", Integer, nullable=False),
    Index("ix_audit_log_at", "at"),
    Index("ix_audit_log_tenant_id", "tenant_id", "id"),
)


# Log streams asked for by clients, handed out to the cluster's agent once (`Pending` ->
# `Streaming`), `Closed` when the stream ended or its client left; the chunks themselves never
# touch a table (they are relayed by NOTIFY, see federation/store/logs.py).
log_requests = Table(
    "log_requests",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("cluster_id", ForeignKey("clusters.id", ondelete="CASCADE"), nullable=False),
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("request", JSONB, nullable=False),  # federation.wire.logs.LogRequest
    Column("state", String(16), nullable=False, server_default="Pending"),
    _created(),
    Index("ix_log_requests_cluster_id", "cluster_id", "state"),
)
