"""Prometheus metrics of the hub API: request latency, jobs by state, capacity by flavor."""

from __future__ import annotations

import time
from collections.abc import Iterator

from aiohttp import web
from prometheus_client import Histogram
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


class StateCollector(Collector):
    """Gauges read from a snapshot the hub refreshes (jobs by state, capacity by flavor)."""

    def __init__(self) -> None:
        self.jobs: list[tuple[str, str, str, int]] = []
        self.capacity: list[tuple[str, str, int, int]] = []

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


STATE = StateCollector()
REGISTRY.register(STATE)
