"""ixsmi (Iluvatar CoreX): `--query-gpu` CSV, the same shape as nvidia-smi's.

Format as ixsmi mirrors nvidia-smi's query options (tests/unit/data/discovery/ixsmi-query.csv
is reconstructed from public ixsmi CSV output of other fields); an unreadable memory field
marks a GPU unhealthy.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.tools.nvidia_smi import QUERY, parse_query
from federation.catalog.types import Vendor


def parse(outputs: Sequence[str]) -> list[DiscoveredDevice]:
    """Devices from the query CSV."""
    (text,) = outputs
    return parse_query(text, Vendor.ILUVATAR)


PROBE = Probe(tool="ixsmi", vendor=Vendor.ILUVATAR, commands=(("ixsmi", *QUERY),), parse=parse)
