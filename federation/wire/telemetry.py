"""Live device telemetry: what agents report to the hub, and the node annotation through which
the agent tells its cluster's extender which devices are in fatal error and how busy they are.

Readings come from the vendors' exporters (the catalog's `telemetry` profiles), already mapped
to a node and a device index of a catalog flavor. The hub keeps the latest reading per device;
the agent sends a device again only when it changed beyond a threshold (see
`cluster_agents.agent.telemetry`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from federation.scheduling.devices import LOAD_BAND
from federation.validation import NUL_FREE

MAX_DEVICES_PER_REPORT = 5_000
# node annotation the agent writes: {"<flavor>": {"load": [pct per device], "down": [index]}}
ANNOTATION = "suanpan.io/device-telemetry"

Name = Annotated[str, StringConstraints(min_length=1, max_length=253), NUL_FREE]
DeviceMarks = tuple[tuple[int | None, ...], frozenset[int]]  # load bands, devices in fault
NodeMarks = Mapping[str, DeviceMarks]  # one node's, by flavor
Marks = dict[str, NodeMarks]  # by node


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class DeviceTelemetry(_Msg):
    """The latest reading of one device; None where its exporter does not say."""

    node: Name
    flavor: Annotated[str, StringConstraints(max_length=128), NUL_FREE]
    index: int = Field(ge=0, le=1023)
    utilization: float | None = Field(default=None, ge=0, le=100)  # percent
    memory_used_mib: int | None = Field(default=None, alias="memoryUsedMib", ge=0)
    memory_total_mib: int | None = Field(default=None, alias="memoryTotalMib", ge=0)
    temperature_c: float | None = Field(default=None, alias="temperatureC", ge=-100, le=300)
    # "" while healthy, else the fatal reading (e.g. "DCGM_FI_DEV_XID_ERRORS=79")
    fault: Annotated[str, StringConstraints(max_length=256), NUL_FREE] = ""
    jobs: list[uuid.UUID] = Field(default_factory=list, max_length=256)  # holding it (faults)

    @property
    def key(self) -> tuple[str, str, int]:
        """(node, flavor, index)."""
        return self.node, self.flavor, self.index


class TelemetryReport(_Msg):
    """Readings that changed (`full`: every device the agent reads; others have none now)."""

    full: bool = False
    devices: list[DeviceTelemetry] = Field(default_factory=list, max_length=MAX_DEVICES_PER_REPORT)


class TelemetryAck(_Msg):
    """How many readings were stored, and how many of them newly reported a fatal error."""

    stored: int
    faults: int


def load_band(utilization: float) -> int:
    """Utilization rounded to the nearest `LOAD_BAND` (the steps share placement compares by),
    so that the annotation changes only when a device's load does."""
    return min(100, int(utilization / LOAD_BAND + 0.5) * LOAD_BAND)


def encode_marks(marks: NodeMarks) -> str:
    """The annotation of one node: per flavor, each device's load band (None: unknown) and the
    indices of devices in fatal error."""
    return json.dumps(
        {
            f: {"load": list(load), "down": sorted(down)}
            for f, (load, down) in sorted(marks.items())
        },
        separators=(",", ":"),
    )


def decode_marks(raw: str | None) -> dict[str, DeviceMarks]:
    """The annotation read back; anything malformed counts as no telemetry."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
        return {
            str(flavor): (
                tuple(None if x is None else max(0, min(100, int(x))) for x in v.get("load", [])),
                frozenset(int(i) for i in v.get("down", [])),
            )
            for flavor, v in value.items()
        }
    except (ValueError, TypeError, AttributeError):
        return {}
