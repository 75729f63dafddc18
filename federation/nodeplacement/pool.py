"""A pool of nodes as numpy arrays, for scoring every node at once.

`Pool` is a struct-of-arrays view of many nodes, each with CPU, memory and the devices of one
accelerator model (`devices.NodeDevices`). The vectorized fit (`Pool.feasible`) is the same rule
as `devices.fit`, computed for all nodes of simple topology at once; nodes whose `TopologyRule`
constrains the shape of an allocation are decided by `devices.fit` itself. Every change of a
node's usage goes through `devices.allocate` / `devices.release`, so the arrays never drift from
the device model. `version[i]` grows whenever node `i` changes, which lets scorers cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from federation.catalog.types import SharingRule, TopologyRule
from federation.scheduling import devices
from federation.scheduling.devices import WHOLE, DeviceRequest, NodeDevices

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PodRequest:
    """What one pod (replica) needs on one node.

    `models` lists the device models the pod accepts (empty: any). A pod without `device`
    needs no accelerator and may run on any node with room.
    """

    cpu_milli: int
    memory_mib: int
    device: DeviceRequest | None = None
    models: frozenset[str] = frozenset()

    @property
    def gpu_milli(self) -> int:
        """Device demand in milli-devices (0 without a device request)."""
        return 0 if self.device is None else self.device.count * self.device.milli


@dataclass(frozen=True, slots=True)
class PoolNode:
    """One node as the pool is built from it: capacity, current usage and its devices."""

    name: str
    cpu_milli: int
    memory_mib: int
    devices: NodeDevices | None = None
    cpu_used: int = 0
    memory_used: int = 0


def _simple(topology: TopologyRule, size: int) -> bool:
    """Whether any set of free devices is a valid allocation (one group, any count)."""
    return not topology.allowed_counts and (topology.group_size == 0 or topology.group_size >= size)


class Pool:
    """Mutable arrays of a node pool; row `i` is node `i`, column `d` is device `d` of it."""

    def __init__(self, nodes: Sequence[PoolNode]) -> None:
        n = len(nodes)
        width = max((nd.devices.size for nd in nodes if nd.devices), default=0)
        self.names = [nd.name for nd in nodes]
        self.model_names = sorted({nd.devices.model for nd in nodes if nd.devices})
        index = {m: k for k, m in enumerate(self.model_names)}
        self.model_id = np.array(
            [index[nd.devices.model] if nd.devices else -1 for nd in nodes], dtype=np.int64
        )
        self.cpu_cap = np.array([nd.cpu_milli for nd in nodes], dtype=np.int64)
        self.mem_cap = np.array([nd.memory_mib for nd in nodes], dtype=np.int64)
        self.cpu_free = self.cpu_cap - np.array([nd.cpu_used for nd in nodes], dtype=np.int64)
        self.mem_free = self.mem_cap - np.array([nd.memory_used for nd in nodes], dtype=np.int64)
        self.size = np.array([nd.devices.size if nd.devices else 0 for nd in nodes], np.int64)
        self.present = np.arange(width)[None, :] < self.size[:, None]
        self.dev_mem = np.zeros((n, width), dtype=np.int64)
        self.used_milli = np.zeros((n, width), dtype=np.int64)
        self.used_mem = np.zeros((n, width), dtype=np.int64)
        self.shares = np.zeros((n, width), dtype=np.int64)
        self.healthy = np.zeros((n, width), dtype=np.bool_)
        self.free = np.zeros((n, width), dtype=np.int64)
        self.topology = [nd.devices.topology if nd.devices else TopologyRule() for nd in nodes]
        self.sharing = [nd.devices.sharing if nd.devices else SharingRule() for nd in nodes]
        self.simple = np.array(
            [_simple(t, int(s)) for t, s in zip(self.topology, self.size, strict=True)], np.bool_
        )
        self.share_enabled = np.array([s.enabled for s in self.sharing], dtype=np.bool_)
        self.share_unit = np.array([max(s.memory_unit_mib, 1) for s in self.sharing], np.int64)
        self.share_cap = np.array([s.max_shares for s in self.sharing], dtype=np.int64)
        self.version = np.zeros(n, dtype=np.int64)
        self.shape_counts: dict[int, IntArray] = {}  # pods per node by shape (0: a share)
        for i, nd in enumerate(nodes):
            if nd.devices:
                self._write_devices(i, nd.devices)
        self.version[:] = 0

    def __len__(self) -> int:
        return len(self.names)

    @property
    def width(self) -> int:
        """Most devices on one node (columns of the device arrays)."""
        return int(self.present.shape[1])

    @property
    def total_milli(self) -> int:
        """All devices of the pool in milli-devices."""
        return int(self.size.sum()) * WHOLE

    def node_devices(self, i: int) -> NodeDevices | None:
        """Node `i`'s devices in the device model (None for a node without accelerators)."""
        if self.model_id[i] < 0:
            return None
        k = int(self.size[i])
        return NodeDevices(
            model=self.model_names[int(self.model_id[i])],
            memory_mib=tuple(int(x) for x in self.dev_mem[i, :k]),
            used_milli=tuple(int(x) for x in self.used_milli[i, :k]),
            used_memory_mib=tuple(int(x) for x in self.used_mem[i, :k]),
            healthy=tuple(bool(x) for x in self.healthy[i, :k]),
            topology=self.topology[i],
            sharing=self.sharing[i],
            shares=tuple(int(x) for x in self.shares[i, :k]),
        )

    def _write_devices(self, i: int, nd: NodeDevices) -> None:
        k = nd.size
        self.dev_mem[i, :k] = nd.memory_mib
        self.used_milli[i, :k] = nd.used_milli
        self.used_mem[i, :k] = nd.used_memory_mib
        self.shares[i, :k] = nd.shares
        self.healthy[i, :k] = nd.healthy
        self.free[i, :k] = np.where(self.healthy[i, :k], WHOLE - self.used_milli[i, :k], 0)
        self.version[i] += 1

    # --- fit -------------------------------------------------------------------------------

    def model_allowed(self, req: PodRequest) -> BoolArray:
        """Per node: does it carry a device model the pod accepts (always, without a device)?"""
        if req.device is None:
            return np.ones(len(self), dtype=np.bool_)
        ok = self.model_id >= 0
        if req.models:
            wanted = [k for k, m in enumerate(self.model_names) if m in req.models]
            ok &= np.isin(self.model_id, wanted)
        return ok

    def feasible(self, req: PodRequest) -> BoolArray:
        """Per node: does `req` fit now? The same decision as `devices.fit` for every node."""
        ok = (self.cpu_free >= req.cpu_milli) & (self.mem_free >= req.memory_mib)
        ok &= self.model_allowed(req)
        dreq = req.device
        if dreq is None:
            return ok
        if dreq.is_share:
            dev_ok = self.share_room(dreq).any(axis=1)
        else:
            dev_ok = (self.size >= dreq.count) & (
                self.whole_free(dreq.memory_mib).sum(axis=1) >= dreq.count
            )
        complex_rows = np.flatnonzero(ok & ~self.simple)
        ok &= dev_ok | ~self.simple
        for i in complex_rows:
            nd = self.node_devices(int(i))
            ok[i] = nd is not None and devices.fit(nd, dreq).ok
        return ok

    def whole_free(self, memory_mib: int = 0) -> BoolArray:
        """Per device: healthy, entirely unused and with at least `memory_mib`."""
        free: BoolArray = (
            self.present
            & self.healthy
            & (self.used_milli == 0)
            & (self.used_mem == 0)
            & (self.dev_mem >= memory_mib)
        )
        return free

    def share_room(self, dreq: DeviceRequest) -> BoolArray:
        """Per device: could the share `dreq` go there now (sharing allowed, room left)?"""
        room: BoolArray = (
            self.share_enabled[:, None]
            & self.present
            & self.healthy
            & (self.used_milli + dreq.milli <= WHOLE)
            & (self.used_mem + self.share_memory(dreq) <= self.dev_mem)
            & ((self.share_cap[:, None] == 0) | (self.shares < self.share_cap[:, None]))
        )
        return room

    def share_memory(self, dreq: DeviceRequest) -> IntArray:
        """Per device: memory a share takes there (as `devices` computes it)."""
        raw = (
            np.full_like(self.dev_mem, dreq.memory_mib)
            if dreq.memory_mib
            else -(-self.dev_mem * dreq.milli // WHOLE)
        )
        unit = self.share_unit[:, None]
        result: IntArray = -(-raw // unit) * unit
        return result

    def choose_devices(self, i: int, req: PodRequest) -> tuple[int, ...]:
        """The devices `devices.fit` picks on node `i` (best fit); () without a device request."""
        if req.device is None:
            return ()
        nd = self.node_devices(i)
        if nd is None:
            raise devices.DeviceConflict(f"{self.names[i]} has no devices")
        decision = devices.fit(nd, req.device)
        if not decision.ok:
            raise devices.DeviceConflict(f"{self.names[i]}: {decision.reason}")
        return decision.devices

    # --- changes ---------------------------------------------------------------------------

    def place(self, i: int, req: PodRequest, chosen: tuple[int, ...]) -> None:
        """Put `req` on node `i` using device indices `chosen`."""
        self._apply(i, req, chosen, sign=1)

    def remove(self, i: int, req: PodRequest, chosen: tuple[int, ...]) -> None:
        """Take `req` (placed on `chosen`) off node `i`."""
        self._apply(i, req, chosen, sign=-1)

    def _apply(self, i: int, req: PodRequest, chosen: tuple[int, ...], sign: int) -> None:
        if req.device is not None:
            nd = self.node_devices(i)
            if nd is None:
                raise devices.DeviceConflict(f"{self.names[i]} has no devices")
            change = devices.allocate if sign > 0 else devices.release
            self._write_devices(i, change(nd, req.device, chosen))
            shape = 0 if req.device.is_share else req.device.count
            counts = self.shape_counts.setdefault(shape, np.zeros(len(self), dtype=np.int64))
            counts[i] += sign
        else:
            self.version[i] += 1
        self.cpu_free[i] -= sign * req.cpu_milli
        self.mem_free[i] -= sign * req.memory_mib

    def allocated_milli(self) -> int:
        """Milli-devices in use across the pool."""
        return int((self.used_milli * (self.present & self.healthy)).sum())
