"""hy-smi (Hygon DCU): product name, unique id and VRAM in one report.

RECONSTRUCTED format: hy-smi derives from rocm-smi and prints "DCU[N] : key: value" lines
(newer releases say "HCU[N]") in sections per option; no complete recorded sample was
available (tests/unit/data/discovery/hy-smi.txt). hy-smi has no health field: a DCU whose
VRAM cannot be read is reported unhealthy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.text import key_value_blocks, mib
from federation.catalog.types import Vendor

_DCU = re.compile(r"^\s*[DH]CU\[(\d+)\]\s*:")


def parse(outputs: Sequence[str]) -> list[DiscoveredDevice]:
    """One device per DCU index."""
    (text,) = outputs
    devices = []
    for index, dcu in sorted(key_value_blocks(text, _DCU).items()):
        memory = mib(dcu.get("vram total memory (b)", "") + " B")
        devices.append(
            DiscoveredDevice(
                vendor=Vendor.HYGON,
                model=dcu.get("card series", ""),
                index=index,
                uuid=dcu.get("unique id", ""),
                memory_mib=memory or 0,
                healthy=memory is not None,
            )
        )
    return devices


PROBE = Probe(
    tool="hy-smi",
    vendor=Vendor.HYGON,
    commands=(("hy-smi", "--showproductname", "--showuniqueid", "--showmeminfo", "vram"),),
    parse=parse,
)
