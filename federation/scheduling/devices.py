"""Device fit: whether one replica's device request fits a node's free devices of one model.

This is the single place that decides device fit. The hub's gang-fit estimate, the cluster
extender's filter/bind and the simulator all call `fit`, so hub and cluster cannot disagree.

Whole-device requests take free, healthy devices with enough memory and honor the model's
`TopologyRule` exactly as its docstring says. Shares (`milli < 1000`, always one device) need the
model's `SharingRule` to allow sharing. A share that names no memory takes memory proportional to
its compute share; memory is rounded up to `memory_unit_mib`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Literal

from federation.catalog.types import SharingRule, TopologyRule

WHOLE = 1000  # milli-devices in one device
LOAD_BAND = 10  # live utilization is compared in steps of this many percent

Preference = Literal["pack", "spread"]


class DeviceConflict(ValueError):
    """An allocation or release does not match the node's current device usage."""


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """What one replica needs on one node: `count` whole devices, or one share of a device."""

    count: int = 1  # devices per replica (>= 1)
    milli: int = WHOLE  # share of ONE device in 1/1000 (1..1000); < 1000 only when count == 1
    memory_mib: int = 0  # memory per device the replica needs (for shares: memory it takes)

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"device count must be >= 1, got {self.count}")
        if not 1 <= self.milli <= WHOLE:
            raise ValueError(f"milli must be in 1..{WHOLE}, got {self.milli}")
        if self.milli < WHOLE and self.count != 1:
            raise ValueError(f"a device share (milli={self.milli}) must ask for one device")
        if self.memory_mib < 0:
            raise ValueError(f"memory_mib must be >= 0, got {self.memory_mib}")

    @property
    def is_share(self) -> bool:
        """True when the request takes part of one device rather than whole devices."""
        return self.milli < WHOLE


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """One node's devices of one model with their current usage; index i is device i.

    `shares` counts the shares placed on each device (empty means none anywhere); `load` is
    each device's live utilization in percent from its exporter (None: not reported; empty:
    none reported), which share placement prefers low (`fit`).
    """

    model: str  # catalog key, e.g. "huawei/Ascend910B3"
    memory_mib: tuple[int, ...]
    used_milli: tuple[int, ...]
    used_memory_mib: tuple[int, ...]
    healthy: tuple[bool, ...]
    topology: TopologyRule
    sharing: SharingRule
    shares: tuple[int, ...] = ()
    load: tuple[float | None, ...] = ()
    # healthy, entirely unused devices: counted once, the usage never changes
    free: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.memory_mib)
        if not self.shares:
            object.__setattr__(self, "shares", (0,) * n)
        if not self.load:
            object.__setattr__(self, "load", (None,) * n)
        lengths = {len(self.used_milli), len(self.used_memory_mib), len(self.healthy)}
        if lengths != {n} or len(self.shares) != n or len(self.load) != n:
            raise ValueError(f"{self.model}: per-device tuples must all have {n} entries")
        free = sum(
            1
            for ok, milli, memory in zip(
                self.healthy, self.used_milli, self.used_memory_mib, strict=True
            )
            if ok and milli == 0 and memory == 0
        )
        object.__setattr__(self, "free", free)

    @property
    def size(self) -> int:
        """Number of devices of this model on the node."""
        return len(self.memory_mib)

    @property
    def group_size(self) -> int:
        """Devices per interconnect group (the whole node when the rule says 0)."""
        return self.topology.group_size or self.size

    def group_of(self, i: int) -> int:
        """Interconnect group of device `i`."""
        return i // self.group_size if self.group_size else 0

    def is_free(self, i: int) -> bool:
        """Whether device `i` is healthy and entirely unused."""
        return self.healthy[i] and self.used_milli[i] == 0 and self.used_memory_mib[i] == 0

    def free_count(self) -> int:
        """Number of healthy, entirely unused devices."""
        return self.free

    def used(
        self, milli: tuple[int, ...], memory_mib: tuple[int, ...], shares: tuple[int, ...]
    ) -> NodeDevices:
        """The same devices with this usage (`replace` without its field-by-field lookups:
        every placement and release makes one)."""
        return NodeDevices(
            self.model,
            self.memory_mib,
            milli,
            memory_mib,
            self.healthy,
            self.topology,
            self.sharing,
            shares,
            self.load,
        )

    def emptied(self, *, heal: bool = False) -> NodeDevices:
        """The same node with nothing placed on it (and every device healthy if `heal`)."""
        zeros = (0,) * self.size
        healthy = (True,) * self.size if heal else self.healthy
        return replace(self, used_milli=zeros, used_memory_mib=zeros, shares=zeros, healthy=healthy)


class FitCode(enum.Enum):
    """Outcome of a fit: OK, INSUFFICIENT (freeing devices may help) or UNRESOLVABLE (never)."""

    OK = "ok"
    INSUFFICIENT = "insufficient"
    UNRESOLVABLE = "unresolvable"


@dataclass(frozen=True, slots=True)
class Fit:
    """A fit decision: its code, a reason with numbers, and the chosen device indices if OK."""

    code: FitCode
    reason: str = ""
    devices: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the request fits."""
        return self.code is FitCode.OK


def fit(node: NodeDevices, req: DeviceRequest, *, prefer: Preference = "pack") -> Fit:
    """Decide whether `req` fits `node` now and, if so, which devices it takes.

    `pack` keeps whole groups intact and puts shares on the fullest device that still fits;
    `spread` takes the freest group and the least used device. A share goes first to the
    devices least busy by their live `load` (in steps of `LOAD_BAND`; unreported counts as
    idle): what is allocated says little of how busy a shared device is. Choices are
    deterministic.
    """
    chosen = choose(node, req, prefer=prefer)
    if chosen is not None:
        return Fit(FitCode.OK, "", chosen)
    never = never_fits(node, req)
    if never is not None:
        return Fit(FitCode.UNRESOLVABLE, never)
    return Fit(FitCode.INSUFFICIENT, insufficient(node, req))


def never_fits(node: NodeDevices, req: DeviceRequest) -> str | None:
    """Why `req` could not fit `node` even with every device free (UNRESOLVABLE), or None.

    Cheap: it looks at the node's devices, not at what is free on them."""
    return _share_never(node, req) if req.is_share else _whole_never(node, req)


def insufficient(node: NodeDevices, req: DeviceRequest) -> str:
    """Why `req`, which does not fit `node` now but could (INSUFFICIENT), does not, in
    numbers (the largest count or share that fits)."""
    return _share_insufficient(node, req) if req.is_share else _whole_insufficient(node, req)


def choose(
    node: NodeDevices, req: DeviceRequest, *, prefer: Preference = "pack"
) -> tuple[int, ...] | None:
    """The devices `fit` would choose, or None; no reason is worked out (for hot loops)."""
    if req.is_share:
        return _choose_share(node, req, prefer)
    if req.count > node.size or not _count_allowed(node, req.count):
        return None
    return _choose_whole(node, _usable(node, req.memory_mib, now=True), req.count, prefer)


def max_feasible_count(node: NodeDevices, req: DeviceRequest) -> int:
    """The largest device count of `req`'s shape that fits `node` now (0 if none)."""
    if req.is_share:
        return 1 if _choose_share(node, req, "pack") is not None else 0
    mask = _usable(node, req.memory_mib, now=True)
    for count in range(sum(mask), 0, -1):
        if _count_allowed(node, count) and _choose_whole(node, mask, count, "pack") is not None:
            return count
    return 0


def shape(node: NodeDevices, count: int) -> str:
    """How `count` whole devices must lie on `node`, in words (for reasons)."""
    gs, spill = node.group_size, node.topology.spill
    if gs >= node.size:
        return "on the node"
    if count <= gs:
        return f"in one group of {gs}" if spill != "any" else f"(one group of {gs} preferred)"
    if spill == "whole_groups":
        return f"as whole groups of {gs}"
    if spill == "even_split":
        k = _even_split_groups(count, gs)
        return f"as {k} groups of {count // k}"
    return "across groups"


def allocate(node: NodeDevices, req: DeviceRequest, devices: tuple[int, ...]) -> NodeDevices:
    """Return `node` with `req` placed on `devices`; raise `DeviceConflict` if they are not free."""
    _check_indices(node, req, devices)
    used = list(node.used_milli)
    memory = list(node.used_memory_mib)
    shares = list(node.shares)
    for i in devices:
        if req.is_share:
            need = _share_memory(node, req, i)
            if not _share_fits(node, req, i, need):
                raise DeviceConflict(f"{node.model}: device {i} has no room for {req.milli}m")
            used[i] += req.milli
            memory[i] += need
            shares[i] += 1
        else:
            if not node.is_free(i) or node.memory_mib[i] < req.memory_mib:
                raise DeviceConflict(f"{node.model}: device {i} is not free")
            used[i] = WHOLE
            memory[i] = node.memory_mib[i]
    return node.used(tuple(used), tuple(memory), tuple(shares))


def release(node: NodeDevices, req: DeviceRequest, devices: tuple[int, ...]) -> NodeDevices:
    """Return `node` with `req` removed from `devices`; the inverse of `allocate`."""
    _check_indices(node, req, devices)
    used = list(node.used_milli)
    memory = list(node.used_memory_mib)
    shares = list(node.shares)
    for i in devices:
        if req.is_share:
            need = _share_memory(node, req, i)
            if used[i] < req.milli or memory[i] < need or shares[i] < 1:
                raise DeviceConflict(f"{node.model}: device {i} does not hold {req.milli}m")
            used[i] -= req.milli
            memory[i] -= need
            shares[i] -= 1
        else:
            if used[i] != WHOLE or shares[i]:
                raise DeviceConflict(f"{node.model}: device {i} is not taken whole")
            used[i] = 0
            memory[i] = 0
    return node.used(tuple(used), tuple(memory), tuple(shares))


# --- whole devices ---------------------------------------------------------------------------


def _whole_never(node: NodeDevices, req: DeviceRequest) -> str | None:
    count, n = req.count, node.size
    if count > n:
        return f"needs {count} devices, node has {n}"
    if not _count_allowed(node, count):
        allowed = ",".join(str(c) for c in sorted(node.topology.allowed_counts))
        return f"{count} devices not allowed by topology ({allowed})"
    capable = _usable(node, req.memory_mib, now=False)
    if sum(capable) < count:
        biggest = max(node.memory_mib, default=0)
        return (
            f"needs {count} devices with {req.memory_mib} MiB, "
            f"{sum(capable)} have it (largest {biggest} MiB)"
        )
    if _choose_whole(node, capable, count, "pack") is None:
        return f"{count} devices {shape(node, count)} impossible"
    return None


def _whole_insufficient(node: NodeDevices, req: DeviceRequest) -> str:
    count = req.count
    return (
        f"needs {count} free devices {shape(node, count)}, "
        f"largest feasible {max_feasible_count(node, req)} ({node.free_count()} free)"
    )


def _count_allowed(node: NodeDevices, count: int) -> bool:
    allowed = node.topology.allowed_counts
    return not allowed or count in allowed


def _usable(node: NodeDevices, memory_mib: int, *, now: bool) -> list[bool]:
    """Per device: could a whole-device request use it (now, or on the node emptied)."""
    return [
        node.memory_mib[i] >= memory_mib and (node.is_free(i) if now else True)
        for i in range(node.size)
    ]


def _even_split_groups(count: int, group_size: int) -> int:
    """The fewest groups k with count % k == 0 and count / k <= group_size."""
    return next(k for k in range(1, count + 1) if count % k == 0 and count // k <= group_size)


def _choose_whole(
    node: NodeDevices, usable: list[bool], count: int, prefer: Preference
) -> tuple[int, ...] | None:
    """Pick `count` usable devices honoring the topology rule, or None if impossible."""
    gs, spill = node.group_size, node.topology.spill
    if gs == 0:
        return None
    groups = [
        [i for i in range(start, min(start + gs, node.size)) if usable[i]]
        for start in range(0, node.size, gs)
    ]
    intact = [len(free) == gs for free in groups]

    def order(indices: list[int]) -> list[int]:
        # pack: best fit (fewest free that suffice); spread: the freest group first.
        sign = 1 if prefer == "pack" else -1
        return sorted(indices, key=lambda g: (sign * len(groups[g]), g))

    if count <= gs:
        fitting = order([g for g, free in enumerate(groups) if len(free) >= count])
        if fitting:
            return tuple(groups[fitting[0]][:count])
        if spill != "any":
            return None
    elif spill == "whole_groups":
        if count % gs:
            return None
        whole = [g for g in range(len(groups)) if intact[g]][: count // gs]
        if len(whole) < count // gs:
            return None
        return tuple(i for g in whole for i in groups[g])
    elif spill == "even_split":
        k = _even_split_groups(count, gs)
        per = count // k
        fitting = order([g for g, free in enumerate(groups) if len(free) >= per])[:k]
        if len(fitting) < k:
            return None
        return tuple(sorted(i for g in fitting for i in groups[g][:per]))
    return _spill_any(groups, intact, count, prefer)


def _spill_any(
    groups: list[list[int]], intact: list[bool], count: int, prefer: Preference
) -> tuple[int, ...] | None:
    """Take devices across groups: pack uses broken groups first (freest first), keeping intact
    groups whole for later; spread takes the freest groups first."""
    if sum(len(free) for free in groups) < count:
        return None
    if prefer == "pack":
        ranked = sorted(range(len(groups)), key=lambda g: (intact[g], -len(groups[g]), g))
    else:
        ranked = sorted(range(len(groups)), key=lambda g: (-len(groups[g]), g))
    chosen: list[int] = []
    for g in ranked:
        chosen.extend(groups[g][: count - len(chosen)])
        if len(chosen) == count:
            break
    return tuple(sorted(chosen))


# --- shares ----------------------------------------------------------------------------------


def _choose_share(node: NodeDevices, req: DeviceRequest, prefer: Preference) -> tuple[int] | None:
    if not node.sharing.enabled:
        return None
    fitting = [
        i for i in range(node.size) if _share_fits(node, req, i, _share_memory(node, req, i))
    ]
    if not fitting:
        return None
    sign = -1 if prefer == "pack" else 1
    best = min(
        fitting,
        key=lambda i: (
            int(node.load[i] or 0) // LOAD_BAND,
            sign * node.used_milli[i],
            sign * node.used_memory_mib[i],
            i,
        ),
    )
    return (best,)


def _share_never(node: NodeDevices, req: DeviceRequest) -> str | None:
    if not node.sharing.enabled:
        return f"{node.model} does not support sharing a device"
    if not _share_capable(node, req):
        return (
            f"a {req.milli}m share needs {req.memory_mib} MiB, "
            f"largest device has {max(node.memory_mib, default=0)} MiB"
        )
    return None


def _share_insufficient(node: NodeDevices, req: DeviceRequest) -> str:
    capable = _share_capable(node, req)
    most = max((WHOLE - node.used_milli[i] for i in capable if node.healthy[i]), default=0)
    return (
        f"needs a {req.milli}m share with {req.memory_mib} MiB on one device, "
        f"most free on a device {most}m"
    )


def _share_capable(node: NodeDevices, req: DeviceRequest) -> list[int]:
    """Devices with the memory for the share, were they empty."""
    return [i for i in range(node.size) if _share_memory(node, req, i) <= node.memory_mib[i]]


def _share_memory(node: NodeDevices, req: DeviceRequest, i: int) -> int:
    """Memory a share takes on device `i`, rounded up to the model's memory unit."""
    raw = req.memory_mib or -(-node.memory_mib[i] * req.milli // WHOLE)
    unit = max(node.sharing.memory_unit_mib, 1)
    return -(-raw // unit) * unit


def _share_fits(node: NodeDevices, req: DeviceRequest, i: int, memory_mib: int) -> bool:
    cap = node.sharing.max_shares
    return (
        node.healthy[i]
        and node.used_milli[i] + req.milli <= WHOLE
        and node.used_memory_mib[i] + memory_mib <= node.memory_mib[i]
        and (cap == 0 or node.shares[i] < cap)
    )


def _check_indices(node: NodeDevices, req: DeviceRequest, devices: tuple[int, ...]) -> None:
    if len(devices) != req.count or len(set(devices)) != len(devices):
        raise DeviceConflict(f"{node.model}: {req.count} distinct devices expected, got {devices}")
    if any(not 0 <= i < node.size for i in devices):
        raise DeviceConflict(f"{node.model}: device index out of range in {devices}")
