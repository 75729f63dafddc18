"""Prometheus metrics of the hub API: request latency, and gauges read from the database at each
scrape (jobs by state, queues, capacity by flavor, cluster health, database reachability)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from api.problems import Handler
from federation.metrics import REGISTRY

REQUEST_SECONDS = Histogram(
    "suanpan_api_request_seconds",
    "API request latency by operation and status",
    ["method", "route", "status"],
    registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Time every request by its route template (not its concrete path)."""
    start = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        REQUEST_SECONDS.labels(request.method, route, str(status)).observe(
            time.perf_counter() - start
        )


CLUSTER_STATES = ("Pending", "Ready", "NotReady", "Offline")

DATABASE_UP = Gauge(
    "suanpan_database_up", "1 when the last scrape could read the database", registry=REGISTRY
)


@dataclass(eq=False)  # registered by identity
class StateCollector(Collector):
    """Gauges read from a snapshot the hub refreshes at each scrape."""

    jobs: list[tuple[str, str, str, int]] = field(default_factory=list)
    capacity: list[tuple[str, str, int, int]] = field(default_factory=list)
    queued: list[tuple[str, str, int, int, float]] = field(default_factory=list)
    clusters: list[tuple[str, str, float | None]] = field(default_factory=list)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Yield the current gauges."""
        jobs = GaugeMetricFamily(
            "suanpan_jobs", "Jobs by tenant, queue and state", labels=["tenant", "queue", "state"]
        )
        for tenant, queue, state, n in self.jobs:
            jobs.add_metric([tenant, queue, state], n)
        yield jobs
        total = GaugeMetricFamily(
            "suanpan_devices", "Devices by cluster and flavor", labels=["cluster", "flavor"]
        )
        used = GaugeMetricFamily(
            "suanpan_devices_allocated",
            "Allocated devices (shares count as fractions) by cluster and flavor",
            labels=["cluster", "flavor"],
        )
        for cluster, flavor, n, milli in self.capacity:
            total.add_metric([cluster, flavor], n)
            used.add_metric([cluster, flavor], milli / 1000)
        yield total
        yield used
        by_queue = ["tenant", "queue", "priority"]
        pending = GaugeMetricFamily(
            "suanpan_queue_pending_jobs", "Queued jobs by tenant, queue, priority", labels=by_queue
        )
        oldest = GaugeMetricFamily(
            "suanpan_queue_oldest_wait_seconds",
            "How long the oldest queued job has waited, by tenant, queue, priority",
            labels=by_queue,
        )
        for tenant, queue, priority, n, age in self.queued:
            pending.add_metric([tenant, queue, str(priority)], n)
            oldest.add_metric([tenant, queue, str(priority)], age)
        yield pending
        yield oldest
        states = GaugeMetricFamily(
            "suanpan_cluster_state",
            "1 for the cluster's current state (Pending, Ready, NotReady, Offline)",
            labels=["cluster", "state"],
        )
        heartbeat = GaugeMetricFamily(
            "suanpan_cluster_heartbeat_age_seconds",
            "Seconds since the cluster's agent last reported",
            labels=["cluster"],
        )
        for cluster, current, since in self.clusters:
            for name in CLUSTER_STATES:
                states.add_metric([cluster, name], float(name == current))
            if since is not None:
                heartbeat.add_metric([cluster], since)
        yield states
        yield heartbeat


STATE = StateCollector()
REGISTRY.register(STATE)
