"""The hub's Prometheus registry and the controllers' metrics (the API adds its own to it)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()

CYCLE_SECONDS = Histogram(
    "suanpan_scheduler_cycle_seconds",
    "Duration of one scheduling cycle (read, decide, write)",
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
DECISIONS = Counter(
    "suanpan_scheduler_decisions",
    "Decisions written by the scheduling loop, by kind",
    ["kind"],
    registry=REGISTRY,
)
PENDING = Gauge(
    "suanpan_scheduler_pending_jobs", "Jobs waiting at the last cycle", registry=REGISTRY
)
LEADER = Gauge(
    "suanpan_scheduler_leader", "1 while this hub replica leads the controllers", registry=REGISTRY
)
PLACEMENTS = Counter(
    "suanpan_placements",
    "Jobs placed, by cluster and accelerator vendor of their tasks ('cpu' for tasks without)",
    ["cluster", "vendor"],
    registry=REGISTRY,
)
QUEUE_WAIT = Histogram(
    "suanpan_queue_wait_seconds",
    "Time from submission to placement (age kept across requeues), by tenant, queue, priority",
    ["tenant", "queue", "priority"],
    registry=REGISTRY,
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
)
