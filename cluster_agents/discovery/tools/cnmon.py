"""cnmon (Cambricon MLU): `cnmon info`.

RECONSTRUCTED format: the per-card "Card N" / "key : value" report with an indented
"Physical Memory Usage" section, as public collectors parse it; no complete recorded sample
was available (tests/unit/data/discovery/cnmon-info.txt). cnmon lists each chip of a
dual-chip MLU370-X8 as its own card. cnmon info prints no health field: a card whose memory
cannot be read is reported unhealthy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.text import key_value_blocks, mib
from federation.catalog.types import Vendor

_CARD = re.compile(r"^Card\s+(\d+)\s*$")


def parse(outputs: Sequence[str]) -> list[DiscoveredDevice]:
    """One device per "Card N" block."""
    (text,) = outputs
    devices = []
    for index, card in sorted(key_value_blocks(text, _CARD).items()):
        memory = mib(card.get("physical memory usage/total", ""))
        devices.append(
            DiscoveredDevice(
                vendor=Vendor.CAMBRICON,
                model=card.get("product name", ""),
                index=index,
                uuid=card.get("uuid", ""),
                memory_mib=memory or 0,
                healthy=memory is not None,
            )
        )
    return devices


PROBE = Probe(tool="cnmon", vendor=Vendor.CAMBRICON, commands=(("cnmon", "info"),), parse=parse)
