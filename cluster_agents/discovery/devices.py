"""What node discovery finds: devices, and the probe that finds those of one vendor tool."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from federation.catalog.types import Vendor


@dataclass(frozen=True, slots=True)
class DiscoveredDevice:
    """One accelerator as its vendor tool reports it."""

    vendor: Vendor
    model: str  # product name as the tool prints it, e.g. "NVIDIA H100 80GB HBM3", "910B3"
    index: int  # the tool's device index (the runtime's logical id)
    uuid: str  # stable id: UUID or serial where the tool has one, else PCI bus id
    memory_mib: int  # 0 when the tool cannot read it
    group: int | None = None  # interconnect group (NVLink island, 910C module) if the tool tells
    healthy: bool = True


@dataclass(frozen=True, slots=True)
class Probe:
    """How to find one vendor's devices: commands to run and a parser of their outputs.

    `parse` receives the outputs of `commands`, in order, and returns the devices.
    """

    tool: str  # executable, also `commands[i][0]`
    vendor: Vendor
    commands: tuple[tuple[str, ...], ...]
    parse: Callable[[Sequence[str]], list[DiscoveredDevice]]
