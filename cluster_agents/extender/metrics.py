"""Prometheus metrics of the extender (own registry, so several extenders fit in one process)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """Calls and errors by verb, latency histograms, bind conflicts, rejections.

    The list+watch and API-call metrics (`suanpan_agent_kube_*`) of the shared Kubernetes
    helpers are registered in the same registry by the CLI.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.calls = Counter("suanpan_extender_calls", "Calls by verb", ["verb"], registry=r)
        self.errors = Counter(
            "suanpan_extender_errors", "Calls answered with an error", ["verb"], registry=r
        )
        self.latency = Histogram(
            "suanpan_extender_call_seconds", "Time to answer", ["verb"], buckets=BUCKETS, registry=r
        )
        self.bind_conflicts = Counter(
            "suanpan_extender_bind_conflicts",
            "Binds refused because the node no longer fits (kube-scheduler retries the pod)",
            registry=r,
        )
        self.gang_timeouts = Counter(
            "suanpan_extender_gang_timeouts",
            "Binds failed because their gang did not reach bind in time (kube-scheduler retries)",
            registry=r,
        )
        self.rejections = Counter(
            "suanpan_extender_node_rejections",
            "Nodes filtered out, by fit code (insufficient, unresolvable)",
            ["code"],
            registry=r,
        )

    def gauge(self, name: str, doc: str, read: Callable[[], float]) -> None:
        """A gauge read at scrape time."""
        Gauge(name, doc, registry=self.registry).set_function(read)

    @contextmanager
    def call(self, verb: str) -> Iterator[None]:
        """Count and time one call of `verb`; an escaping exception counts as an error."""
        self.calls.labels(verb).inc()
        start = time.perf_counter()
        try:
            yield
        except Exception:
            self.errors.labels(verb).inc()
            raise
        finally:
            self.latency.labels(verb).observe(time.perf_counter() - start)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
