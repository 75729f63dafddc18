"""Filter and device choice: `devices.fit` on the cache's occupancy, mapped to the protocol.

An INSUFFICIENT fit (freeing devices may help) goes to `FailedNodes`, so kube-scheduler may
preempt there; an UNRESOLVABLE one (the node lacks the model, or its topology can never host
the count) goes to `FailedAndUnresolvableNodes`, so preemption skips the node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from cluster_agents.extender.cache import Cache
from cluster_agents.extender.demand import Demand
from federation.scheduling import devices
from federation.scheduling.devices import Fit, FitCode, Preference


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """Nodes that fit, and the reasons of those that do not, split by whether preemption helps."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)


def reason(demand: Demand, decision: Fit) -> str:
    """A failed fit in words, naming what was asked for."""
    return f"{demand.target}: {decision.reason}"


def filter_nodes(cache: Cache, demand: Demand, names: Iterable[str]) -> FilterOutcome:
    """Split `names` by whether `demand` fits each node now."""
    outcome = FilterOutcome()
    for name in names:
        decision = cache.fit(name, demand)
        if decision.ok:
            outcome.passed.append(name)
        elif decision.code is FitCode.UNRESOLVABLE:
            outcome.unresolvable[name] = reason(demand, decision)
        else:
            outcome.failed[name] = reason(demand, decision)
    return outcome


def choose(cache: Cache, demand: Demand, node: str, prefer: Preference) -> tuple[str, Fit]:
    """The model and the exact devices `demand` takes on `node` now (a failed Fit if none)."""
    info = cache.nodes.get(node)
    resolved = info.resolve(demand.target) if info else None
    if resolved is None:
        return "", cache.fit(node, demand)
    model = resolved.model.key
    return model, devices.fit(cache.occupancy(node, model).devices, demand.request, prefer=prefer)
