"""Filter and device choice: `devices.fit` on the cache's occupancy, mapped to the protocol.

An INSUFFICIENT fit (freeing devices may help) goes to `FailedNodes`, so kube-scheduler may
preempt there; an UNRESOLVABLE one (the node lacks the model, or its topology can never host
the count) goes to `FailedAndUnresolvableNodes`, so preemption skips the node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from cluster_agents.extender.cache import Cache
from cluster_agents.kube.pods import Demand
from federation.scheduling import devices
from federation.scheduling.devices import Fit, FitCode, Preference


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """Nodes that fit; when none does, the reasons of those that do not, split by whether
    preemption helps (kube-scheduler reads them only then: for its diagnosis and preemption).
    The counts of nodes that do not fit are there either way."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    insufficient_count: int = 0
    unresolvable_count: int = 0


def filter_nodes(cache: Cache, demand: Demand, names: Sequence[str]) -> FilterOutcome:
    """Split `names` by whether `demand` fits each node now."""
    table = cache.fit_table(demand)
    ok, never = table.passed, table.unresolvable
    passed = [name for name in names if name in ok]
    if len(passed) == len(names):
        return FilterOutcome(passed)
    if passed:
        unresolvable = sum(1 for name in names if name in never)
        return FilterOutcome(
            passed,
            insufficient_count=len(names) - len(passed) - unresolvable,
            unresolvable_count=unresolvable,
        )
    failed = {n: cache.fit(n, demand).reason for n in names if n not in never}
    return FilterOutcome(
        [],
        failed,
        {n: never[n] for n in names if n in never},
        len(failed),
        len(names) - len(failed),
    )


def choose(
    cache: Cache,
    demand: Demand,
    node: str,
    prefer: Preference,
    hint: tuple[str, tuple[int, ...]] | None = None,
) -> tuple[str, Fit]:
    """The model and the exact devices `demand` takes on `node` now (a failed Fit if none).

    The hub's `hint` (node, devices) wins when it names this node and `devices.fit`, allowed
    only those devices, still chooses exactly them (free, and valid for the topology).
    """
    info = cache.nodes.get(node)
    resolved = info.resolve(demand.target) if info else None
    if resolved is None:
        return "", cache.fit(node, demand)
    model = resolved.model.key
    free = cache.occupancy(node, model).devices
    if hint is not None and hint[0] == node:
        only = replace(free, healthy=tuple(h and i in hint[1] for i, h in enumerate(free.healthy)))
        hinted = devices.choose(only, demand.request, prefer=prefer)
        if hinted is not None and set(hinted) == set(hint[1]):
            return model, Fit(FitCode.OK, "", hinted)
    decision = devices.fit(free, demand.request, prefer=prefer)
    return model, decision if decision.ok else cache.fit(node, demand)
