"""Node label keys written by the node discovery DaemonSet and read by the catalog resolver.

This is a contract between `cluster_agents.discovery` (writer) and `federation.catalog.resolve`
(reader): change a key here and both sides follow.
"""

from __future__ import annotations

from collections.abc import Sequence

PREFIX = "suanpan.io/accelerator"
VENDOR = f"{PREFIX}.vendor"  # catalog vendor, e.g. "huawei"
MODEL = f"{PREFIX}.model"  # catalog model name, e.g. "Ascend910B3"
COUNT = f"{PREFIX}.count"  # healthy devices the vendor tool sees
MEMORY_MIB = f"{PREFIX}.memory-mib"  # smallest memory of one healthy device, MiB
TOPOLOGY_GROUPS = f"{PREFIX}.topology-groups"  # interconnect groups, see `encode_groups`

ALL = (VENDOR, MODEL, COUNT, MEMORY_MIB, TOPOLOGY_GROUPS)

MAX_VALUE_LENGTH = 63  # Kubernetes label value limit


def encode_groups(groups: Sequence[Sequence[int]]) -> str:
    """Encode device-index groups as a label value: groups joined by "_", members by ".".

    Runs of consecutive indices shrink to "a-b": [[0,1,2,3],[4,5,6,7]] -> "0-3_4-7",
    [[0,2],[1,3]] -> "0.2_1.3". Groups are written in order of their smallest member.
    """
    parts = []
    for group in sorted((sorted(set(g)) for g in groups if g), key=lambda g: g[0]):
        runs: list[str] = []
        start = prev = group[0]
        for i in [*group[1:], None]:
            if i is not None and i == prev + 1:
                prev = i
                continue
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            if i is not None:
                start = prev = i
        parts.append(".".join(runs))
    return "_".join(parts)


def decode_groups(value: str) -> tuple[tuple[int, ...], ...]:
    """Inverse of `encode_groups`; raises ValueError on a malformed value."""
    groups = []
    for part in value.split("_"):
        members: list[int] = []
        for run in part.split("."):
            lo, sep, hi = run.partition("-")
            first, last = int(lo), int(hi) if sep else int(lo)
            if last < first:
                raise ValueError(f"bad device range {run!r} in {value!r}")
            members.extend(range(first, last + 1))
        groups.append(tuple(members))
    return tuple(groups)
