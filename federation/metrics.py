"""The hub's Prometheus registries: the API's (`REGISTRY`, the API adds its own metrics to it)
and the scheduling loop's (`LOOP_REGISTRY`), apart because the loop may run in a process of its
own whose exposition the API relays (`api/scheduling_process.py`)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry()
LOOP_REGISTRY = CollectorRegistry()

CYCLE_SECONDS = Histogram(
    "suanpan_scheduler_cycle_seconds",
    "Duration of one scheduling cycle (read, decide, write)",
    registry=LOOP_REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
DECISIONS = Counter(
    "suanpan_scheduler_decisions",
    "Decisions written by the scheduling loop, by kind",
    ["kind"],
    registry=LOOP_REGISTRY,
)
PENDING = Gauge(
    "suanpan_scheduler_pending_jobs", "Jobs waiting at the last cycle", registry=LOOP_REGISTRY
)
WINDOW = Gauge(
    "suanpan_scheduler_window_jobs",
    "Queued jobs the next cycle considers at most (sized to take scheduling.cycleTargetSeconds)",
    registry=LOOP_REGISTRY,
)
PARKED = Gauge(
    "suanpan_scheduler_parked_jobs",
    "Waiting jobs the next cycle skips until something they could use appears",
    registry=LOOP_REGISTRY,
)
HOLDS_EXPIRED = Counter(
    "suanpan_scheduler_preemption_holds_expired",
    "Capacity held for a preemptor released because the preemptor was not placed within the "
    "victims' grace periods and the hold margin (something outside the hub may have taken it)",
    registry=LOOP_REGISTRY,
)
LEADER = Gauge(
    "suanpan_scheduler_leader",
    "1 while this hub replica leads the controllers",
    registry=LOOP_REGISTRY,
)
PLACEMENTS = Counter(
    "suanpan_placements",
    "Jobs placed, by cluster and accelerator vendor of their tasks ('cpu' for tasks without)",
    ["cluster", "vendor"],
    registry=LOOP_REGISTRY,
)
QUEUE_WAIT = Histogram(
    "suanpan_queue_wait_seconds",
    "Time from submission to placement (age kept across requeues), by tenant, queue, priority",
    ["tenant", "queue", "priority"],
    registry=LOOP_REGISTRY,
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
)
SERVICE_DESIRED = Gauge(
    "suanpan_service_desired_replicas",
    "Replicas a service wants across its clusters (the autoscaler's or its fixed count)",
    ["tenant", "service"],
    registry=LOOP_REGISTRY,
)
SERVICE_READY = Gauge(
    "suanpan_service_ready_replicas",
    "Ready replicas of a service across its clusters, as its agents last reported",
    ["tenant", "service"],
    registry=LOOP_REGISTRY,
)


def in_process_loop_metrics() -> bytes:
    """The exposition of the scheduling loop running in this process (if any)."""
    return generate_latest(LOOP_REGISTRY)


def write_exposition(registry: CollectorRegistry, path: Path) -> None:
    """Write `registry`'s exposition to `path` atomically (readers see a whole one)."""
    partial = path.with_suffix(".partial")
    partial.write_bytes(generate_latest(registry))
    partial.replace(path)
