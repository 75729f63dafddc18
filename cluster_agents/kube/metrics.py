"""Prometheus metrics of the Kubernetes helpers: watch lag, resyncs, API call latency.

The agent's backend and the extender (in its own registry) both register them; the names keep
the `suanpan_agent_kube_` prefix they were first published under.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class BackendMetrics:
    """The backend's metrics in `registry` (a private one when None)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.watch_lag = Histogram(
            "suanpan_agent_kube_watch_lag_seconds",
            "Receive time of a watch event minus the object's last write (managedFields, 1 s"
            " resolution)",
            ["resource"],
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.resyncs = Counter(
            "suanpan_agent_kube_resyncs",
            "Full lists after a watch expired (410 Gone) or failed",
            ["resource"],
            registry=r,
        )
        self.api_seconds = Histogram(
            "suanpan_agent_kube_api_seconds",
            "Latency of Kubernetes API calls by call and HTTP status (0: no answer)",
            ["call", "code"],
            buckets=API_BUCKETS,
            registry=r,
        )
