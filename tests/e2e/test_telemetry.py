"""Live device telemetry on a real local cluster: kube-apiserver, kube-scheduler calling
`suanpan-extender`, kwok nodes of four vendors, the agent over `KubernetesBackend` reading
exporters this test serves on loopback in each vendor's own format (DCGM for NVIDIA,
npu-exporter for Ascend, mlu-exporter for Cambricon, dcu-exporter for Hygon, ix-exporter for
Iluvatar and gcu-exporter for Enflame, whose nodes the test adds).

Telemetry reaches the hub; a share lands on an idle device rather than on one that is busy
though nothing is allocated on it; a fatal error (XID 79) takes its device out of service:
the job on it is told, the hub places nothing that needs it, the extender binds around it,
and once the error clears the device serves again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from cluster_agents.agent.exporters import ExporterPods, ExporterTarget
from cluster_agents.backends.kubernetes import KubernetesBackend
from deploy.fleet import Fleet, local_fleet
from deploy.local.clusters import Environment
from deploy.local.extender import ExtenderProcess
from deploy.local.kube import wait_for
from deploy.local.processes import free_ports
from federation.catalog.labels import MODEL, VENDOR
from federation.hubconfig import HubConfig
from federation.k8s_names import tenant_namespace
from federation.wire import annotations as ann
from federation.wire.telemetry import ANNOTATION
from tests.e2e.conftest import K8sEnvFactory

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ADMIN = "sp_e2e_telemetry_admin"
NS = "suanpan-tel"
ACME = tenant_namespace(NS, "acme")
BEIJING = "dc-beijing"
H100, GPUS = "nvidia/H100-80GB", ("bj-h100-0", "bj-h100-1")
XID79 = "DCGM_FI_DEV_XID_ERRORS=79"
LONG = 36_000  # run seconds: the jobs here never end by themselves


@dataclass
class Devices:
    """What the served exporters say: per (node, device) utilization and an error code."""

    busy: dict[tuple[str, int], float] = field(default_factory=dict)
    errors: dict[tuple[str, int], int] = field(default_factory=dict)

    def util(self, node: str, i: int) -> float:
        return self.busy.get((node, i), 0.0)


Value = Callable[[str, int, "Devices"], float]  # node, device, what the exporters say
Extra = Callable[[str, int, "Devices"], str]  # labels a single metric adds


def _const(value: float) -> Value:
    return lambda node, i, d: value


@dataclass(frozen=True)
class Exposition:
    """One vendor exporter's text for a node's 8 devices: each metric a gauge per device with
    the exporter's label set (`labels`), its value and any labels of its own."""

    labels: Callable[[str, int], str]
    metrics: tuple[tuple[str, str, Value, Extra | None], ...]

    def __call__(self, node: str, d: Devices) -> str:
        out = []
        for name, help_, value, extra in self.metrics:
            out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
            for i in range(8):
                labels = self.labels(node, i) + (extra(node, i, d) if extra else "")
                out.append(f"{name}{{{labels}}} {value(node, i, d):g}")
        return "\n".join(out) + "\n"


def _util(scale: float = 1.0, offset: float = 0.0) -> Value:
    return lambda node, i, d: offset + scale * d.util(node, i)


# dcgm-exporter (etc/default-counters.csv fields, its label set)
dcgm = Exposition(
    lambda node, i: (
        f'gpu="{i}",UUID="GPU-{node}-{i:04d}",pci_bus_id="00000000:{16 + i:02X}:00.0",'
        f'device="nvidia{i}",modelName="NVIDIA H100 80GB HBM3",Hostname="{node}",'
        'DCGM_FI_DRIVER_VERSION="550.54.15"'
    ),
    (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", _util(), None),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", _util(800), None),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", _util(-800, 81559), None),
        ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", _util(1 / 3, 35), None),
        (
            "DCGM_FI_DEV_XID_ERRORS",
            "Value of the last XID error encountered.",
            lambda node, i, d: d.errors.get((node, i), 0),
            None,
        ),
    ),
)
# npu-exporter (collector/npu_collector.go; no node label)
npu = Exposition(
    lambda node, i: (
        f'id="{i}",model_name="Ascend910B3",pcie_bus_info="0000:C{i}:00.0",'
        f'vdie_id="5A1B0C3D-0000-0000-0000-00000000000{i}"'
    ),
    (
        ("npu_chip_info_utilization", "the ai core utilization", _const(30.0), None),
        ("npu_chip_info_hbm_used_memory", "the npu hbm used memory", _const(2048), None),
        ("npu_chip_info_hbm_total_memory", "the npu hbm total memory", _const(65536), None),
        ("npu_chip_info_temperature", "the npu temperature", _const(41), None),
        ("npu_chip_info_health_status", "the npu health status", _const(1), None),
    ),
)
# mlu-exporter with --metrics-prefix=mlu (examples/metrics.yaml labels)
mlu = Exposition(
    lambda node, i: (
        f'driver="v5.10.22",mcu="v1.1.4",mlu="{i}",model="MLU370-X8",node="{node}",'
        f'node_ip="192.168.0.10",sn="sn-{i}",type="mlu370",uuid="MLU-{node}-{i}"'
    ),
    (
        (
            "mlu_utilization",
            "The utilization of Cambricon MLU, unit is '%'",
            _const(20.0),
            lambda node, i, d: ',vf=""',
        ),
        (
            "mlu_memory_used",
            "The used physical memory of Cambricon MLU, unit is 'B'",
            _const(2**30),
            None,
        ),
        (
            "mlu_memory_total",
            "The total physical memory of Cambricon MLU, unit is 'B'",
            _const(24 * 2**30),
            None,
        ),
        (
            "mlu_temperature",
            "The board temperature of Cambricon MLU, unit is 'celsius'",
            _const(44),
            None,
        ),
        (
            "mlu_health",
            "The health state of Cambricon MLU, 1 means health, 0 means sick",
            _const(1),
            lambda node, i, d: ',unhealth_reason=""',
        ),
    ),
)
# dcu-exporter (main.go's gauges and labels)
dcu = Exposition(
    lambda node, i: (
        f'device_id="T8R13800000000{i:02d}",minor_number="{i}",name="K100 AI",'
        f'node="{node}",pcieBus_number="0000:{0x40 + i:02x}:00.0"'
    ),
    (
        ("dcu_utilizationrate", "dcu metrics of gauge", _const(10), None),
        ("dcu_usedmemory_bytes", "dcu metrics of gauge", _const(2**30), None),
        ("dcu_memorycap_bytes", "dcu metrics of gauge", _const(64 * 2**30), None),
        ("dcu_temp", "dcu metrics of gauge", _const(39.5), None),
    ),
)
# ix-exporter (pkg/collector constants and labels)
ix = Exposition(
    lambda node, i: (
        f'driver="4.4.0",gpu="{i}",ixml="4.4.0",name="Iluvatar BI-V150",'
        f'node_name="{node}",serial="2412000000000{i}",uuid="GPU-ix-{node}-{i}"'
    ),
    (
        ("ix_gpu_utilization", "Utilization of iluvatar GPU (%).", _const(15), None),
        ("ix_mem_used", "Used memory (MiB).", _const(512), None),
        ("ix_mem_total", "Total memory (MiB).", _const(65536), None),
        ("ix_temperature", "Temperature (C).", _const(45), None),
    ),
)


def _gcu_bad(node: str, i: int, d: Devices) -> bool:
    return (node, i) in d.errors


# gcu-exporter (the user guide's metrics and labels); health 1 is unhealthy, 2 healthy
gcu = Exposition(
    lambda node, i: (
        f'busid="0000:{0x40 + i:02x}:00.0",host="{node}",minor_number="{i}",'
        f'name="Enflame S60",pod_name="",pod_namespace="",slot="PCIE{i}_GPU",'
        f'uuid="GCU-{node}-{i}"'
    ),
    (
        ("enflame_gcu_usage", "GCU usage", _const(25), None),
        ("enflame_gcu_memory_used_bytes", "GCU used memory", _const(2**30), None),
        ("enflame_gcu_memory_total_bytes", "GCU total memory", _const(48 * 2**30), None),
        ("enflame_gcu_temperatures", "GCU temperature", _const(-1), None),
        (
            "enflame_gcu_health",
            "GCU health status",
            lambda node, i, d: 1 if _gcu_bad(node, i, d) else 2,
            lambda node, i, d: f',healthmsg="{"Unhealthy" if _gcu_bad(node, i, d) else "Healthy"}"',
        ),
    ),
)


EXPORTERS: dict[str, Exposition] = {
    "bj-h100-0": dcgm,
    "bj-h100-1": dcgm,
    "bj-ascend-0": npu,
    "bj-mlu-0": mlu,
    "bj-dcu-0": dcu,
    "tel-ix-0": ix,
    "tel-gcu-0": gcu,
}
# nodes the profile lacks, added by the test: (extended resource, labels naming the model)
EXTRA_NODES = {
    "tel-ix-0": ("iluvatar.ai/gpu", {VENDOR: "iluvatar", MODEL: "BI-V150"}),
    "tel-gcu-0": ("enflame.com/gcu", {"enflame.com/gcu.model": "S60"}),
}


def kwok_node(name: str, resource: str, labels: dict[str, str]) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", resource: "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **labels},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


@dataclass
class World:
    env: Environment
    fleet: Fleet
    token: str
    devices: Devices

    async def submit(self, name: str, count: int, fraction: float | None = None) -> str:
        accelerators: dict[str, Any] = {"count": count, "anyOf": [{"flavor": H100}]}
        if fraction is not None:
            accelerators["fraction"] = fraction
        manifest = {
            "apiVersion": "suanpan.io/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "queue": "default",
                "tasks": [
                    {
                        "name": "main",
                        "image": "registry.local/e2e:1",
                        "annotations": {ann.RUN_SECONDS: str(LONG)},
                        "resources": {"cpu": "1", "memory": "1Gi", "accelerators": accelerators},
                    }
                ],
            },
        }
        created = await self.fleet.call("POST", "/v1/jobs", self.token, json=manifest)
        assert "id" in created, created
        return str(created["id"])

    async def state(self, job: str) -> str:
        return str((await self.fleet.call("GET", f"/v1/jobs/{job}", self.token))["state"])

    async def running(self, job: str) -> None:
        async def up() -> bool:
            return await self.state(job) == "Running"

        await wait_for(f"job {job} Running", up, 60)

    async def pod(self, job: str) -> dict[str, Any]:
        async with self.env.clusters[0].client() as client:
            listed = await client.get(
                f"/api/v1/namespaces/{ACME}/pods?labelSelector={ann.JOB_LABEL}%3D{job}"
            )
        (pod,) = listed["items"]
        return dict(pod)

    async def device(self, node: str, index: int) -> dict[str, Any]:
        found = await self.fleet.call("GET", "/v1/telemetry", params={"cluster": BEIJING})
        return next((d for d in found["items"] if d["node"] == node and d["index"] == index), {})

    async def h100(self) -> dict[str, Any]:
        cluster = await self.fleet.call("GET", f"/v1/clusters/{BEIJING}")
        return next(f for f in cluster["flavors"] if f["flavor"] == H100)


def _devices(pod: dict[str, Any]) -> list[int]:
    return [int(i) for i in pod["metadata"]["annotations"][ann.DEVICES].split(",")]


@pytest.fixture(scope="module")
def environment(
    k8s_env_factory: K8sEnvFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Environment]:
    """One cluster (dc-beijing) whose scheduler calls our extender."""
    (port,) = free_ports(1)
    env = k8s_env_factory(1, {BEIJING: f"http://127.0.0.1:{port}"})
    (cs,) = env.clusters
    extender = ExtenderProcess(cs.kubeconfig, port, tmp_path_factory.mktemp("tel") / "extender.log")
    extender.start()
    try:
        yield env
    finally:
        extender.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(environment: Environment) -> AsyncIterator[World]:
    devices = Devices()

    async def metrics(request: web.Request) -> web.Response:
        node = request.match_info["node"]
        return web.Response(text=EXPORTERS[node](node, devices), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/{node}/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    (port,) = free_ports(1)
    await web.TCPSite(runner, "127.0.0.1", port).start()
    # npu-exporter names no node: its endpoint is configured with one (--exporter NODE=URL)
    targets = tuple(
        ExporterTarget(
            f"http://127.0.0.1:{port}/{node}/metrics", node if node == "bj-ascend-0" else ""
        )
        for node in EXPORTERS
    )
    try:
        async with local_fleet(ADMIN, config=HubConfig(interval_s=0.2)) as fleet:
            await fleet.call("POST", "/v1/tenants", json={"name": "acme"})
            await fleet.call("POST", "/v1/tenants/acme/queues", json={"name": "default"})
            member = await fleet.call(
                "POST", "/v1/tokens", json={"name": "m", "role": "member", "tenant": "acme"}
            )
            (cs,) = environment.clusters
            async with cs.client() as client:
                for name, (resource, labels) in EXTRA_NODES.items():
                    await client.post("/api/v1/nodes", kwok_node(name, resource, labels))
            backend = KubernetesBackend(
                cs.kubeconfig,
                NS,
                fleet.catalog,
                exporters=targets,
                exporter_pods=(ExporterPods("app=no-exporter-runs-here", 9400),),  # finds none
            )
            await fleet.attach(cs.name, backend, namespace=NS)
            yield World(environment, fleet, str(member["token"]), devices)
    finally:
        await runner.cleanup()
        async with environment.clusters[0].client() as client:
            for name in EXTRA_NODES:
                await client.delete(f"/api/v1/nodes/{name}")


async def test_each_vendors_exporter_reaches_the_hub(world: World) -> None:
    for node in GPUS:  # device 0: nothing allocated, yet busy
        world.devices.busy[(node, 0)] = 97.0
    world.devices.errors[("tel-gcu-0", 5)] = 1  # Enflame's health series: 1 is unhealthy
    vendors = {"nvidia", "huawei", "cambricon", "hygon", "iluvatar", "enflame"}

    async def reported() -> bool:
        found = await world.fleet.call("GET", "/v1/telemetry", params={"cluster": BEIJING})
        read = {d["vendor"] for d in found["items"] if d["utilization"] is not None}
        busy = await world.device("bj-h100-1", 0)
        return read == vendors and busy.get("utilization") == 97

    await wait_for("telemetry of six vendors at the hub", reported, 60)
    ix_gpu = await world.device("tel-ix-0", 2)
    assert (ix_gpu["utilization"], ix_gpu["memoryUsedMib"], ix_gpu["temperatureC"]) == (15, 512, 45)

    async def gcu_out() -> bool:
        d = await world.device("tel-gcu-0", 5)
        return d.get("healthy") is False and d["fault"] == "enflame_gcu_health=1"

    await wait_for("the unhealthy Enflame GCU out of service", gcu_out, 30)
    gcu_ok = await world.device("tel-gcu-0", 4)
    assert gcu_ok["healthy"] and gcu_ok["temperatureC"] is None  # -1: unsupported
    ascend = await world.device("bj-ascend-0", 3)
    assert (ascend["utilization"], ascend["memoryUsedMib"], ascend["temperatureC"]) == (
        30,
        2048,
        41,
    )
    mlu = await world.device("bj-mlu-0", 7)
    assert (mlu["utilization"], mlu["memoryUsedMib"]) == (20, 1024)
    assert (await world.h100())["reporting"] == 16
    async with world.env.clusters[0].client() as client:
        node = await client.get("/api/v1/nodes/bj-h100-0")
    marks = json.loads(node["metadata"]["annotations"][ANNOTATION])
    assert marks[H100]["load"][:2] == [100, 0] and marks[H100]["down"] == []


async def test_a_share_lands_on_an_idle_device_not_the_busy_one(world: World) -> None:
    job = await world.submit("share", 1, fraction=0.5)
    await world.running(job)
    pod = await world.pod(job)
    assert _devices(pod) == [1]  # packing alone would take device 0, busy at 97 %


async def test_a_device_error_takes_the_device_out_of_service(world: World) -> None:
    share = await world.pod(
        next(
            j["id"]
            for j in (await world.fleet.call("GET", "/v1/jobs", world.token))["items"]
            if j["name"] == "share"
        )
    )
    node = share["spec"]["nodeName"]
    other = next(n for n in GPUS if n != node)
    world.devices.errors[(node, 1)] = 79  # under the share
    world.devices.errors[(other, 3)] = 79  # a free device

    async def out() -> bool:
        d = await world.device(other, 3)
        return (
            d.get("healthy") is False
            and d["fault"] == XID79
            and (await world.h100())["healthy"] == 14
        )

    await wait_for("both failed devices out of service at the hub", out, 60)
    job_id = share["metadata"]["labels"][ann.JOB_LABEL]
    events = (await world.fleet.call("GET", f"/v1/jobs/{job_id}/events", world.token))["items"]
    assert any(e["reason"] == "DeviceFailed" and XID79 in e["message"] for e in events)

    # eight whole GPUs: no node has eight healthy free ones now, so the hub places nothing
    eight = await world.submit("eight", 8)

    async def considered() -> bool:
        found = await world.fleet.call("GET", f"/v1/jobs/{eight}", world.token)
        return bool(found["reason"])

    await wait_for("the 8-GPU job considered", considered, 30)
    assert await world.state(eight) == "Queued"

    # seven fit beside the failed device: the extender binds around it
    seven = await world.submit("seven", 7)
    await world.running(seven)
    pod = await world.pod(seven)
    failed = 1 if pod["spec"]["nodeName"] == node else 3
    assert failed not in _devices(pod) and len(_devices(pod)) == 7

    # the seven leave and the free device's error clears: the eight run there, on all of it
    await world.fleet.call("POST", f"/v1/jobs/{seven}/cancel", world.token)
    world.devices.errors.pop((other, 3))
    await world.running(eight)
    pod = await world.pod(eight)
    assert pod["spec"]["nodeName"] == other and _devices(pod) == list(range(8))
