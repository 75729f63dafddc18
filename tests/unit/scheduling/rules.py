"""Vendor topology and sharing rules as the catalog states them (accelerators.md section E)."""

from __future__ import annotations

from federation.catalog.types import SharingRule, TopologyRule
from federation.scheduling.devices import NodeDevices

GIB = 1024

# Ascend 910(A) 8-card module: {1,2,4,8}, <= 4 inside one HCCS ring of 4, 8 = whole node.
ASCEND_910 = TopologyRule(
    group_size=4, allowed_counts=frozenset({1, 2, 4, 8}), spill="whole_groups"
)
# Ascend 910B x8: any count up to 8 in one HCCS domain.
ASCEND_910B_X8 = TopologyRule()
# Ascend 910B x16: 1-8 inside one ring of 8, 10/12/14 split evenly over both rings, 16 whole.
ASCEND_910B_X16 = TopologyRule(
    group_size=8,
    allowed_counts=frozenset({*range(1, 9), 10, 12, 14, 16}),
    spill="even_split",
)
# Ascend 910C: 1 or even; even counts take whole two-die modules.
ASCEND_910C = TopologyRule(
    group_size=2, allowed_counts=frozenset({1, *range(2, 17, 2)}), spill="whole_groups"
)
# Kunlunxin P800: {1,2,4,8}, <= 4 inside one NUMA wing of 4.
KUNLUN_P800 = TopologyRule(
    group_size=4, allowed_counts=frozenset({1, 2, 4, 8}), spill="whole_groups"
)
# NVIDIA: any count, no hard groups.
NVIDIA_ANY = TopologyRule()

NO_SHARING = SharingRule()
HAMI_SHARING = SharingRule(enabled=True, memory_unit_mib=1, max_shares=4)
VNPU_SHARING = SharingRule(enabled=True, memory_unit_mib=8 * GIB, max_shares=0)

RULES: dict[str, tuple[TopologyRule, int, int]] = {
    # name: (rule, devices per node, MiB per device)
    "huawei/Ascend910": (ASCEND_910, 8, 32 * GIB),
    "huawei/Ascend910B3": (ASCEND_910B_X8, 8, 64 * GIB),
    "huawei/Ascend910B3x16": (ASCEND_910B_X16, 16, 64 * GIB),
    "huawei/Ascend910C": (ASCEND_910C, 16, 64 * GIB),
    "kunlunxin/P800": (KUNLUN_P800, 8, 96 * GIB),
    "nvidia/H100-80GB": (NVIDIA_ANY, 8, 80 * GIB),
}


def node_devices(
    model: str,
    *,
    taken: frozenset[int] | set[int] = frozenset(),
    unhealthy: frozenset[int] | set[int] = frozenset(),
    sharing: SharingRule = NO_SHARING,
    size: int | None = None,
) -> NodeDevices:
    """A node of `model` (a key of RULES) with the devices in `taken` used whole."""
    rule, n, memory = RULES[model]
    n = size if size is not None else n
    return NodeDevices(
        model=model,
        memory_mib=(memory,) * n,
        used_milli=tuple(1000 if i in taken else 0 for i in range(n)),
        used_memory_mib=tuple(memory if i in taken else 0 for i in range(n)),
        healthy=tuple(i not in unhealthy for i in range(n)),
        topology=rule,
        sharing=sharing,
    )
