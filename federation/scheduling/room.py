"""Scratch free capacity of one node while replicas are tried on it: shared by the gang-fit
and flavor-availability filters and by preemption (so none of them imports another)."""

from __future__ import annotations

from contextlib import suppress

from federation.scheduling.devices import (
    DeviceConflict,
    NodeDevices,
    Preference,
    allocate,
    choose,
    release,
)
from federation.scheduling.model import FlavorOption, Task
from federation.scheduling.state import NodeState, Usage


class Room:
    """Scratch free capacity of one node while replicas are tried on it."""

    __slots__ = ("cpu", "devices", "memory", "pods")

    def __init__(self, cpu: int, memory: int, pods: int, devices: dict[str, NodeDevices]) -> None:
        self.cpu = cpu
        self.memory = memory
        self.pods = pods
        self.devices = devices

    @classmethod
    def of(cls, node: NodeState) -> Room:
        """The node's free capacity now."""
        return cls(node.cpu_free, node.memory_free, node.pods_free, dict(node.devices))

    def copy(self) -> Room:
        """An independent copy to try replicas on."""
        return Room(self.cpu, self.memory, self.pods, dict(self.devices))

    def free(self, usage: Usage) -> None:
        """Give back what `usage` holds here (devices only if they are held as it says)."""
        self.cpu += usage.cpu_milli
        self.memory += usage.memory_mib
        self.pods += usage.pods
        if usage.request is not None:
            with suppress(DeviceConflict):
                self.devices[usage.model] = release(
                    self.devices[usage.model], usage.request, usage.devices
                )

    def fill(
        self, task: Task, option: FlavorOption | None, want: int, prefer: Preference
    ) -> list[tuple[int, ...]]:
        """Place up to `want` replicas of `task` here; the device indices of each."""
        placed: list[tuple[int, ...]] = []
        request = option.request if option is not None else None
        while (
            len(placed) < want
            and self.cpu >= task.cpu_milli
            and self.memory >= task.memory_mib
            and self.pods >= 1
        ):
            if option is not None and request is not None:
                devices = self.devices.get(option.flavor)
                if devices is None:
                    break
                chosen = choose(devices, request, prefer=prefer)
                if chosen is None:
                    break
                self.devices[option.flavor] = allocate(devices, request, chosen)
                placed.append(chosen)
            else:
                placed.append(())
            self.cpu -= task.cpu_milli
            self.memory -= task.memory_mib
            self.pods -= 1
        return placed
