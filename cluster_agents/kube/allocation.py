"""What a vendor's device plugin reads to hand a container the devices the extender chose.

The catalog names the protocol per model and node resource (`DeviceAllocation`); this module
reads a node's device ids and encodes the pod annotations of each protocol (pure functions).
The extender writes them in the Binding that sets the pod's node, so the apiserver merges them
in the same update; the kubelet calls the plugin's Allocate only after that.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from federation.catalog import DeviceAllocation
from federation.scheduling.devices import WHOLE, DeviceRequest

HAMI_NODE = "hami.io/vgpu-node"
HAMI_TIME = "hami.io/vgpu-time"
HAMI_BIND_TIME = "hami.io/bind-time"
HAMI_BIND_PHASE = "hami.io/bind-phase"
HAMI_ALLOCATING = "allocating"
MINDCLUSTER_TIME = "predicate-time"


def registered_ids(allocation: DeviceAllocation, annotations: Mapping[str, str]) -> list[str]:
    """The device ids the node's plugin registered under `allocation.register`, in device order.

    HAMi: JSON `[{"id", "index", ...}]` sorted by `index` (0 is omitted in the JSON), or the
    legacy text `id,count,mem,cores,type,numa,health[,index,mode]:...`; MindCluster: the
    comma-separated device names. [] when absent or unreadable.
    """
    raw = annotations.get(allocation.register, "") if allocation.register else ""
    if not raw:
        return []
    if allocation.kind == "mindcluster":
        return [name.strip() for name in raw.split(",") if name.strip()]
    try:
        entries: Any = json.loads(raw)
    except ValueError:
        return [part.split(",", 1)[0] for part in raw.split(":") if "," in part]
    if not isinstance(entries, list):
        return []
    listed = [e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]
    return [e["id"] for e in sorted(listed, key=lambda e: int(e.get("index") or 0))]


def device_ids(
    allocation: DeviceAllocation, node: str, annotations: Mapping[str, str], count: int
) -> tuple[str, ...]:
    """Ids of devices 0..count-1 of a node: registered ones by position, the pattern after."""
    listed = registered_ids(allocation, annotations)
    return tuple(
        listed[i]
        if i < len(listed)
        else allocation.device_id.format(node=node, type=allocation.device_type, index=i)
        for i in range(count)
    )


def allocation_annotations(
    allocation: DeviceAllocation,
    *,
    ids: Sequence[str],
    request: DeviceRequest,
    device_memory_mib: int,
    node: str,
    slot: int,
    slots: int,
    now: float,
) -> dict[str, str]:
    """The annotations telling the plugin that the container at `slot` (of `slots`, init
    containers first) gets the devices `ids` for `request`, bound to `node` at `now`."""
    joined = ",".join(ids)
    if allocation.kind == "visible-env":
        return {allocation.annotation: joined}
    if allocation.kind == "mindcluster":
        return {allocation.annotation: joined, MINDCLUSTER_TIME: str(int(now))}
    memory = request.memory_mib if request.is_share else 0
    memory = memory or device_memory_mib * request.milli // WHOLE
    cores = request.milli * 100 // WHOLE
    mine = "".join(f"{i},{allocation.device_type},{memory},{cores}:" for i in ids)
    containers = [mine if n == slot else "" for n in range(max(slots, slot + 1))]
    stamp = str(int(now))
    return {
        allocation.annotation: "".join(f"{c};" for c in containers),
        HAMI_NODE: node,
        HAMI_TIME: stamp,
        HAMI_BIND_TIME: stamp,
        HAMI_BIND_PHASE: HAMI_ALLOCATING,
    }
