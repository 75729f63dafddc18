"""npu-smi (Huawei Ascend): `npu-smi info`.

Format recorded from npu-smi 23.0-24.1 on Atlas 800T A2 (910B), Atlas A3 (910C: two dies per
NPU, each shown as its own chip with its own bus id) and Atlas 300I Duo (310P: two chips under
one NPU line); see tests/unit/data/discovery/npu-smi-*. Each device is one chip; its memory is
the last "used / total" of the chip line (HBM when present). Health "OK" and "Warning" (a
minor alarm) are usable, "Alarm" and "Critical" are not. npu-smi prints no UUID, so a chip
is identified by "<bus id>/<chip>". The chips of one multi-chip NPU form a group.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from cluster_agents.discovery.devices import DiscoveredDevice, Probe
from cluster_agents.discovery.text import Row, table_blocks
from federation.catalog.types import Vendor

USABLE = ("OK", "Warning")


def _leading_int(cell: str) -> int | None:
    first = cell.split()[:1]
    return int(first[0]) if first and first[0].isdigit() else None


def _chips(text: str) -> list[tuple[int, str, str, Row]]:
    """(npu id, name, health, chip row) for every chip line, in listing order."""
    found: list[tuple[int, str, str, Row]] = []
    for block in table_blocks(text):
        head = block[0]
        if any("Process id" in cell for cell in head):
            break  # the process table follows the devices
        npu = _leading_int(head[0])
        if len(head) != 3 or npu is None or len(block) < 2:
            continue
        name = " ".join(head[0].split()[1:])
        found.extend(
            (npu, name, head[1], row)
            for row in block[1:]
            if len(row) == 3 and _leading_int(row[0]) is not None
        )
    return found


def parse(outputs: Sequence[str]) -> list[DiscoveredDevice]:
    """One device per chip line of `npu-smi info`."""
    (text,) = outputs
    chips = _chips(text)
    per_npu = Counter(npu for npu, *_ in chips)
    devices = []
    for index, (npu, name, health, row) in enumerate(chips):
        totals = re.findall(r"/\s*(\d+)", row[2])
        devices.append(
            DiscoveredDevice(
                vendor=Vendor.HUAWEI,
                model=name,
                index=index,
                uuid=f"{row[1]}/{_leading_int(row[0])}",
                memory_mib=int(totals[-1]) if totals else 0,
                group=npu if per_npu[npu] > 1 else None,
                healthy=health in USABLE,
            )
        )
    return devices


PROBE = Probe(tool="npu-smi", vendor=Vendor.HUAWEI, commands=(("npu-smi", "info"),), parse=parse)
