"""The agent's telemetry loop at a bounded rate: a full report first, then only readings that
moved beyond a threshold or whose fault changed; faults are marked on the node at once and
name the jobs holding the device."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from cluster_agents.agent.backend import PodStatus
from cluster_agents.agent.telemetry import TelemetryLoop, Thresholds, holders, moved
from cluster_agents.backends.simulated import Reading, SimNodeSpec, SimulatedCluster
from federation.wire.telemetry import DeviceTelemetry, TelemetryAck, TelemetryReport
from tests.unit.backends.k8s_objects import CATALOG

GPU_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}


@dataclass
class Hub:
    """Records what the loop reports (the hub API itself is tested on PostgreSQL)."""

    reports: list[TelemetryReport] = field(default_factory=list)

    async def telemetry(self, report: TelemetryReport) -> TelemetryAck:
        self.reports.append(report)
        return TelemetryAck(stored=len(report.devices), faults=0)


def _sim() -> SimulatedCluster:
    capacity = {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4"}
    return SimulatedCluster(CATALOG, [SimNodeSpec("gpu-0", GPU_LABELS, capacity)])


async def test_reports_are_full_first_then_only_what_moved() -> None:
    sim, hub = _sim(), Hub()
    loop = TelemetryLoop(sim, hub)  # type: ignore[arg-type]
    await loop.step()
    assert [(r.full, len(r.devices)) for r in hub.reports] == [(True, 4)]
    await loop.step()  # nothing moved: nothing sent
    sim.readings[("gpu-0", 2)] = Reading(utilization=3.0)  # below the threshold
    await loop.step()
    assert len(hub.reports) == 1
    sim.readings[("gpu-0", 2)] = Reading(utilization=40.0)
    await loop.step()
    assert [(d.index, d.utilization) for d in hub.reports[-1].devices] == [(2, 40.0)]
    assert not hub.reports[-1].full
    loop.resync()  # a new session with the hub: everything again
    await loop.step()
    assert hub.reports[-1].full and len(hub.reports[-1].devices) == 4


async def test_a_fault_is_marked_at_once_and_names_the_jobs_on_the_device() -> None:
    sim, hub = _sim(), Hub()
    loop = TelemetryLoop(sim, hub)  # type: ignore[arg-type]
    await loop.step()
    assert all(d.healthy for n in sim.nodes() for d in n.devices)
    sim.readings[("gpu-0", 1)] = Reading(utilization=95.0, fault="DCGM_FI_DEV_XID_ERRORS=79")
    await loop.step()
    (node,) = sim.nodes()
    assert [d.healthy for d in node.devices] == [True, False, True, True]
    (sent,) = hub.reports[-1].devices
    assert (sent.index, sent.fault) == (1, "DCGM_FI_DEV_XID_ERRORS=79")
    sim.readings.clear()
    await loop.step()
    assert all(d.healthy for d in sim.nodes()[0].devices)
    assert hub.reports[-1].devices[0].fault == ""


def test_thresholds() -> None:
    base = DeviceTelemetry(
        node="n",
        flavor="f",
        index=0,
        utilization=50,
        memory_used_mib=1000,
        memory_total_mib=80_000,
        temperature_c=50,
    )
    limits = Thresholds()
    assert not moved(base, base.model_copy(update={"utilization": 54.9}), limits)
    assert moved(base, base.model_copy(update={"utilization": 55}), limits)
    assert moved(base, base.model_copy(update={"utilization": None}), limits)
    assert not moved(base, base.model_copy(update={"memory_used_mib": 4999}), limits)
    assert moved(base, base.model_copy(update={"memory_used_mib": 5000}), limits)
    assert moved(base, base.model_copy(update={"temperature_c": 47}), limits)
    assert moved(base, base.model_copy(update={"fault": "x"}), limits)


def test_holders_are_the_live_pods_on_the_device() -> None:
    job = uuid.uuid4()
    reading = DeviceTelemetry(node="n", flavor="f", index=2, fault="x")

    def pod(name: str, node: str, devices: tuple[int, ...], phase: str) -> PodStatus:
        return PodStatus(name, str(job), 1, "main", 0, phase, node, devices=devices)  # type: ignore[arg-type]

    pods = [pod("a", "n", (2,), "Running"), pod("b", "n", (1,), "Running")]
    assert holders(reading, pods) == [job]
    assert (
        holders(reading, [pod("c", "n", (2,), "Succeeded"), pod("d", "m", (2,), "Running")]) == []
    )


async def test_nodes_no_exporter_reads_are_not_written_to() -> None:
    sim, hub = _sim(), Hub()
    marked: list[str] = []

    async def mark(node: str, marks: object) -> None:
        marked.append(node)

    sim.mark_devices = mark  # type: ignore[method-assign,assignment]

    async def nothing() -> list[DeviceTelemetry]:
        return []

    sim.telemetry = nothing  # type: ignore[method-assign]
    loop = TelemetryLoop(sim, hub)  # type: ignore[arg-type]
    await loop.step()
    assert marked == [] and hub.reports[-1].full and hub.reports[-1].devices == []
