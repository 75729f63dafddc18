"""Filter and device choice: `devices.fit` on the cache's occupancy, mapped to the protocol.

An INSUFFICIENT fit (freeing devices may help) goes to `FailedNodes`, so kube-scheduler may
preempt there; an UNRESOLVABLE one (the node lacks the model, or its topology can never host
the count) goes to `FailedAndUnresolvableNodes`, so preemption skips the node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cluster_agents.extender.cache import NOT_CACHED, Cache
from cluster_agents.kube.pods import Demand
from federation.scheduling import devices
from federation.scheduling.devices import Fit, Preference


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """Nodes that fit, and the reasons of those that do not, split by whether preemption helps."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)


def filter_nodes(cache: Cache, demand: Demand, names: Sequence[str]) -> FilterOutcome:
    """Split `names` by whether `demand` fits each node now."""
    table = cache.fit_table(demand)
    ok, failed, unresolvable = table.passed, table.failed, table.unresolvable
    passed = [name for name in names if name in ok]
    if len(passed) == len(names):
        return FilterOutcome(passed)
    return FilterOutcome(
        passed,
        {n: failed.get(n, NOT_CACHED) for n in names if n not in ok and n not in unresolvable},
        {n: unresolvable[n] for n in names if n in unresolvable},
    )


def choose(cache: Cache, demand: Demand, node: str, prefer: Preference) -> tuple[str, Fit]:
    """The model and the exact devices `demand` takes on `node` now (a failed Fit if none)."""
    info = cache.nodes.get(node)
    resolved = info.resolve(demand.target) if info else None
    if resolved is None:
        return "", cache.fit(node, demand)
    model = resolved.model.key
    decision = devices.fit(cache.occupancy(node, model).devices, demand.request, prefer=prefer)
    return model, decision if decision.ok else cache.fit(node, demand)
