"""What a pod asks for and which devices it holds, read from its annotations or its requests.

A pod the agent created carries `FLAVOR` (a catalog model key) and `DEVICE_REQUEST`
(`{"count", "milli", "memoryMib"}`); any other pod that requests a managed resource is taken
from its requests as whole devices. The extender writes the devices it chose at bind into
`DEVICES`. Pure functions over the pod's JSON (camelCase, as the apiserver and kube-scheduler
send it), used by the extender (filter, bind) and by the agent (what pods use on a node).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.catalog import Catalog, parse_quantity, pod_device_usage
from federation.podtemplate import effective_request
from federation.scheduling.devices import WHOLE, DeviceRequest
from federation.wire import annotations as wire

MIB = 1024 * 1024


class DemandError(ValueError):
    """The pod's annotations or requests cannot be turned into one device request."""


@dataclass(frozen=True, slots=True)
class Demand:
    """One replica's device request on one node, with the CPU and memory it asks for.

    `target` is a catalog model key ("huawei/Ascend910B3"), or a resource name that several
    models share ("nvidia.com/gpu"); the node's labels then say which model it is there.
    """

    target: str
    request: DeviceRequest
    cpu_milli: int = 0
    memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class PodInfo:
    """The facts about one pod that device occupancy and binding need."""

    uid: str
    namespace: str
    name: str
    node: str  # spec.nodeName, "" while unbound
    active: bool  # False once Succeeded or Failed
    succeeded: bool  # phase Succeeded: it ran to completion (a gang member that counts)
    demand: Demand | None  # None: no accelerator of ours
    devices: tuple[int, ...] | None  # the DEVICES annotation, None if absent or malformed
    cpu_milli: int = 0
    memory_mib: int = 0
    device_slot: int = 0  # the container holding the devices, init containers first
    slots: int = 1  # containers, init ones included
    gang: str = ""  # GANG: the gang this pod is a member of ("": none)
    gang_size: int = 0  # GANG_SIZE: members that bind through the extender
    hint: tuple[str, tuple[int, ...]] | None = None  # HINT_DEVICES: the hub's node and devices


def parse_device_request(text: str) -> DeviceRequest:
    """Decode the `DEVICE_REQUEST` annotation; raise DemandError when malformed."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise DemandError(f"{wire.DEVICE_REQUEST}: not JSON: {text!r}") from exc
    if not isinstance(raw, dict) or set(raw) - {"count", "milli", "memoryMib"}:
        raise DemandError(f"{wire.DEVICE_REQUEST}: expected {{count, milli, memoryMib}}: {text!r}")
    values = {k: raw.get(k, d) for k, d in (("count", 1), ("milli", WHOLE), ("memoryMib", 0))}
    if any(type(v) is not int for v in values.values()):
        raise DemandError(f"{wire.DEVICE_REQUEST}: values must be integers: {text!r}")
    try:
        return DeviceRequest(values["count"], values["milli"], values["memoryMib"])
    except ValueError as exc:
        raise DemandError(f"{wire.DEVICE_REQUEST}: {exc}") from exc


def parse_devices(text: str) -> tuple[int, ...]:
    """Decode the `DEVICES` annotation ("0,1,2,3"); raise ValueError when malformed."""
    devices = tuple(int(part) for part in text.split(","))
    if any(i < 0 for i in devices) or len(set(devices)) != len(devices):
        raise ValueError(f"{wire.DEVICES}: {text!r} is not a list of distinct indices")
    return devices


def format_devices(devices: Sequence[int]) -> str:
    """Encode device indices for the `DEVICES` annotation."""
    return ",".join(str(i) for i in devices)


def _requests(container: Mapping[str, Any]) -> dict[str, str]:
    """A container's effective requests: limits, overridden by explicit requests."""
    resources = container.get("resources") or {}
    return {**(resources.get("limits") or {}), **(resources.get("requests") or {})}


def _containers(pod: Mapping[str, Any]) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    spec = pod.get("spec") or {}
    return (
        [_requests(c) for c in spec.get("containers") or ()],
        [_requests(c) for c in spec.get("initContainers") or ()],
    )


def _cpu_memory(
    pod: Mapping[str, Any], containers: list[dict[str, str]], init: list[dict[str, str]]
) -> tuple[int, int]:
    """Effective CPU (milli) and memory (MiB) requests, as kube-scheduler counts them (sidecars
    with the containers); `containers` and `init` are the pod's `_containers`."""
    sidecars = [
        c.get("restartPolicy") == "Always"
        for c in (pod.get("spec") or {}).get("initContainers") or ()
    ]

    def total(name: str, scale: int) -> int:
        def one(requests: Mapping[str, str]) -> int:
            return int(parse_quantity(requests[name]) * scale) if name in requests else 0

        return effective_request(map(one, containers), zip(map(one, init), sidecars, strict=True))

    return total("cpu", 1000), total("memory", 1) // MIB


def pod_demand(
    catalog: Catalog, pod: Mapping[str, Any], *, annotated: bool = True
) -> Demand | None:
    """The pod's device demand, or None when it asks for no accelerator.

    With `annotated`, `FLAVOR` / `DEVICE_REQUEST` win over the resource requests.
    Raises DemandError for malformed annotations or quantities, an unknown flavor, or devices
    of several kinds.
    """
    containers, init = _containers(pod)
    try:
        cpu, memory = _cpu_memory(pod, containers, init)
    except ValueError as exc:
        raise DemandError(f"bad resource quantity: {exc}") from exc
    notes = ((pod.get("metadata") or {}).get("annotations") or {}) if annotated else {}
    return _demand(catalog, containers, init, cpu, memory, notes)


def _demand(
    catalog: Catalog,
    containers: list[dict[str, str]],
    init: list[dict[str, str]],
    cpu: int,
    memory: int,
    notes: Mapping[str, str],
) -> Demand | None:
    """`pod_demand` from the pod's parts, worked out once."""
    try:
        usage = {k: n for k, n in pod_device_usage(catalog, containers, init).items() if n}
    except ValueError as exc:
        raise DemandError(f"bad resource quantity: {exc}") from exc
    flavor, request = notes.get(wire.FLAVOR), notes.get(wire.DEVICE_REQUEST)
    if flavor:
        model = catalog.get(flavor)
        if model is None:
            raise DemandError(f"{wire.FLAVOR}: {flavor!r} is not in the accelerator catalog")
        usage = {model.key: sum(usage.values()) or 1}
    if not usage:
        return None
    if len(usage) > 1:
        raise DemandError(f"asks for devices of several kinds: {', '.join(sorted(usage))}")
    ((target, count),) = usage.items()
    device = parse_device_request(request) if request else DeviceRequest(count)
    return Demand(target, device, cpu, memory)


def _device_slot(catalog: Catalog, containers: list[dict[str, str]]) -> int:
    """The first container (init containers first) asking for devices of ours."""
    return next(
        (i for i, c in enumerate(containers) if any(pod_device_usage(catalog, [c]).values())),
        0,
    )


def parse_hint(text: str) -> tuple[str, tuple[int, ...]] | None:
    """Decode `HINT_DEVICES` ("node:0,1"); None when malformed."""
    node, sep, devices = text.partition(":")
    try:
        return (node, parse_devices(devices)) if node and sep else None
    except ValueError:
        return None


def gang_of(notes: Mapping[str, str]) -> tuple[str, int]:
    """The pod's gang and its size from `GANG` / `GANG_SIZE` (("", 0): no gang, or malformed)."""
    gang, size = notes.get(wire.GANG, ""), notes.get(wire.GANG_SIZE, "")
    if not gang or not size.isdigit() or int(size) < 1:
        return "", 0
    return gang, int(size)


def pod_info(catalog: Catalog, pod: Mapping[str, Any]) -> PodInfo:
    """The occupancy-relevant view of a pod.

    A malformed annotation falls back to the resource requests, so that a bound pod still
    counts (conservatively) against its node.
    """
    meta = pod.get("metadata") or {}
    notes = meta.get("annotations") or {}
    containers, init = _containers(pod)
    try:
        cpu, memory = _cpu_memory(pod, containers, init)
    except ValueError:
        cpu, memory, demand = 0, 0, None
    else:
        try:
            demand = _demand(catalog, containers, init, cpu, memory, notes)
        except DemandError:
            try:
                demand = _demand(catalog, containers, init, cpu, memory, {})
            except DemandError:
                demand = None
    try:
        slot = _device_slot(catalog, [*init, *containers]) if demand else len(init)
    except ValueError:
        slot = len(init)
    phase = (pod.get("status") or {}).get("phase")
    gang, gang_size = gang_of(notes)
    try:
        raw = notes.get(wire.DEVICES)
        devices = parse_devices(raw) if raw else None
    except ValueError:
        devices = None
    return PodInfo(
        uid=meta.get("uid", ""),
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        node=(pod.get("spec") or {}).get("nodeName") or "",
        active=phase not in ("Succeeded", "Failed"),
        succeeded=phase == "Succeeded",
        demand=demand,
        devices=devices,
        cpu_milli=cpu,
        memory_mib=memory,
        device_slot=slot,
        slots=len(init) + len(containers),
        gang=gang,
        gang_size=gang_size,
        hint=parse_hint(notes.get(wire.HINT_DEVICES, "")),
    )
