"""The three extender verbs on one cache: decoded JSON in, JSON-ready values out.

The HTTP layer (`server`) only moves bytes; the benchmark calls these methods directly.
filter and bind answer errors in the protocol's `Error` field; prioritize, which has none,
raises ValueError on bad input.

By default filter keeps only the node it would place the pod on (the hub's hinted node when
it fits, else the policy's best): kube-scheduler then takes it without scoring and without
calling prioritize, one HTTP round trip per pod fewer. `FILTER_KEEPS_ALL` keeps every fitting
node and lets kube-scheduler add the policy's prioritize scores to its own plugins' (soft
affinities and spreading then count too).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from cluster_agents.extender.binder import Binder, PodAPI
from cluster_agents.extender.cache import Cache
from cluster_agents.extender.decide import filter_nodes
from cluster_agents.extender.metrics import Metrics
from cluster_agents.extender.scoring import Prioritizer, preference
from cluster_agents.extender.wire import (
    WireError,
    binding_result,
    filter_result,
    parse_args,
    parse_binding,
    priority_list,
)
from cluster_agents.kube.pods import Demand, DemandError, parse_hint, pod_demand
from cluster_agents.kube.watch import Reflector
from federation.wire.annotations import HINT_DEVICES

log = logging.getLogger(__name__)

FILTER_KEEPS_BEST, FILTER_KEEPS_ALL = "best", "all"
FILTER_KEEPS = (FILTER_KEEPS_BEST, FILTER_KEEPS_ALL)


class Extender:
    """filter / prioritize / bind over a cache kept current by list+watch."""

    def __init__(
        self,
        cache: Cache,
        api: PodAPI,
        policy: str = "suanpan",
        metrics: Metrics | None = None,
        *,
        gang_wait_s: float = 20.0,
        watches: Sequence[Reflector] = (),
        filter_keeps: str = FILTER_KEEPS_BEST,
    ) -> None:
        if filter_keeps not in FILTER_KEEPS:
            raise ValueError(f"filter_keeps must be one of {FILTER_KEEPS}, got {filter_keeps!r}")
        self.cache = cache
        self.filter_keeps = filter_keeps
        self.watches = watches
        self.metrics = metrics or Metrics()
        self.prioritizer = Prioritizer(cache, policy)
        self.binder = Binder(cache, api, preference(policy), gang_wait_s=gang_wait_s)
        self.metrics.gauge("suanpan_extender_cache_nodes", "Nodes cached", lambda: len(cache.nodes))
        self.metrics.gauge("suanpan_extender_cache_pods", "Pods cached", lambda: len(cache.pods))
        self.metrics.gauge(
            "suanpan_extender_reservations", "Binds in flight", lambda: cache.reservations
        )

    @property
    def ready(self) -> bool:
        """Whether the first lists of nodes and pods arrived."""
        return self.cache.nodes_synced and self.cache.pods_synced

    @property
    def problem(self) -> str | None:
        """Why the cache is not current (not listed yet, a watch broken); None when it is."""
        if not self.ready:
            return "cache not synced yet"
        return next((w.problem for w in self.watches if w.problem), None)

    def filter(self, body: Any) -> dict[str, Any]:
        """ExtenderArgs -> ExtenderFilterResult."""
        with self.metrics.call("filter"):
            try:
                args = parse_args(body)
                demand = pod_demand(self.cache.catalog, args.pod)
            except (WireError, DemandError) as exc:
                return self._error("filter", filter_result(None, error=str(exc)))
            if demand is None:
                return filter_result(args, args.node_names)
            if not self.ready:
                return self._error("filter", filter_result(args, error="cache not synced yet"))
            outcome = filter_nodes(self.cache, demand, args.node_names)
            self.metrics.rejections.labels("insufficient").inc(outcome.insufficient_count)
            self.metrics.rejections.labels("unresolvable").inc(outcome.unresolvable_count)
            passed = outcome.passed
            if self.filter_keeps == FILTER_KEEPS_BEST and len(passed) > 1:
                passed = [self._choice(demand, args.pod, passed)]
            return filter_result(args, passed, outcome.failed, outcome.unresolvable)

    def _choice(self, demand: Demand, pod: Mapping[str, Any], passed: list[str]) -> str:
        """The node of `passed` (where the pod fits) it goes to: the hub's hinted node, else
        the policy's best."""
        notes = (pod.get("metadata") or {}).get("annotations") or {}
        hint = parse_hint(notes.get(HINT_DEVICES, ""))
        if hint is not None and hint[0] in passed:
            return hint[0]
        return self.prioritizer.best(demand, passed) or passed[0]

    def prioritize(self, body: Any) -> list[dict[str, Any]]:
        """ExtenderArgs -> HostPriorityList (raises WireError / DemandError on bad input)."""
        with self.metrics.call("prioritize"):
            args = parse_args(body)
            demand = pod_demand(self.cache.catalog, args.pod)
            if demand is None:
                return priority_list(dict.fromkeys(args.node_names, 0))
            return priority_list(self.prioritizer.scores(demand, args.node_names))

    async def bind(self, body: Any) -> dict[str, str]:
        """ExtenderBindingArgs -> ExtenderBindingResult."""
        with self.metrics.call("bind"):
            try:
                args = parse_binding(body)
            except WireError as exc:
                return self._error("bind", binding_result(str(exc)))
            outcome = await self.binder.bind(args)
            if outcome.conflict:
                self.metrics.bind_conflicts.inc()
            if outcome.gang_timeout:
                self.metrics.gang_timeouts.inc()
            if outcome.error:
                log.warning("bind %s/%s: %s", args.pod_namespace, args.pod_name, outcome.error)
                return self._error("bind", binding_result(outcome.error))
            return binding_result()

    def _error(self, verb: str, result: dict[str, Any]) -> dict[str, Any]:
        self.metrics.errors.labels(verb).inc()
        return result
