"""The real extender behind the real kube-scheduler (deploy/local harness, one cluster).

`suanpan-extender` runs as a subprocess on 127.0.0.1 against the cluster's apiserver; the
harness renders kube-scheduler's config with the extender's URL (filter, prioritize, bind,
nodeCacheCapable). Besides the profile's nodes (`bj-ascend-0`: 8 Ascend 910B3, two H100
nodes, ...) the module adds `e2e-b16`, an Atlas 200T A2 Box16 (16 Ascend 910B3 in two rings
of 8). Each test cleans its pods up, so device occupancy starts empty for the next one.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cluster_agents.extender import render, scheduler_config
from deploy.local.clusters import ClusterState, unready_nodes
from deploy.local.kube import JSON, KubeClient, KubeError, wait_for
from deploy.local.processes import free_ports
from deploy.local.profile import NodeSpec
from federation.catalog import load_catalog
from federation.wire import annotations as wire
from tests.e2e.conftest import K8sEnvFactory

pytestmark = pytest.mark.e2e

B3 = "huawei/Ascend910B3"
B3_RESOURCE = "huawei.com/Ascend910B3"
BOX16 = "e2e-b16"
ASCEND8 = "bj-ascend-0"
EXTENDER = Path(sys.executable).with_name("suanpan-extender")


# ------------------------------------------------------------------------------ helpers


@dataclass
class ExtenderProcess:
    """`suanpan-extender` as a subprocess on 127.0.0.1."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(
        cls, kubeconfig: str, port: int, log: Path, policy: str = "suanpan", *extra: str
    ) -> ExtenderProcess:
        """Start it (returns at once; see `wait_ready`)."""
        argv = [
            str(EXTENDER),
            "--kubeconfig",
            kubeconfig,
            "--listen",
            f"127.0.0.1:{port}",
            "--policy",
            policy,
            *extra,
        ]
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        return cls(f"http://127.0.0.1:{port}", proc, log)

    async def wait_ready(self, timeout_s: float = 30) -> None:
        """Wait until its caches are synced (/readyz)."""
        async with aiohttp.ClientSession() as session:

            async def ready() -> bool:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"suanpan-extender exited:\n{self.log.read_text()[-3000:]}")
                try:
                    async with session.get(self.url + "/readyz") as resp:
                        return resp.status == 200
                except aiohttp.ClientError:
                    return False

            await wait_for("suanpan-extender /readyz", ready, timeout_s)

    async def metrics(self) -> dict[str, float]:
        """Its counters and gauges as {'name{label=value}': value}."""
        async with aiohttp.ClientSession() as session, session.get(self.url + "/metrics") as r:
            return parse_metrics(await r.text())

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as {'name{k=v,...}': value}."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}"] = sample.value
    return values


def node_manifest(cluster: str, name: str, resources: dict[str, int], **labels: str) -> JSON:
    """A kwok-managed node with these accelerators (as the harness builds its nodes)."""
    capacity = {
        "cpu": "128",
        "memory": "1Ti",
        "pods": "110",
        **{k: str(v) for k, v in resources.items()},
    }
    return NodeSpec(name, labels, {}, capacity).manifest(cluster)


def pod_manifest(
    name: str,
    count: int,
    *,
    resource: str = B3_RESOURCE,
    flavor: str | None = B3,
    priority_class: str = "",
    node: str = "",
) -> JSON:
    """A pod for `suanpan-scheduler`; with `flavor`, annotated as the agent annotates."""
    requests = {"cpu": "1", "memory": "1Gi", resource: str(count)}
    notes = {}
    if flavor:
        notes = {wire.FLAVOR: flavor, wire.DEVICE_REQUEST: json.dumps({"count": count})}
    spec: JSON = {
        "schedulerName": wire.SCHEDULER_NAME,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "train:latest",
                "resources": {"requests": requests, "limits": requests},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {wire.MANAGED_LABEL: "true"}, "annotations": notes},
        "spec": spec,
    }


async def wait_bound(kc: KubeClient, ns: str, name: str, timeout_s: float = 60) -> JSON:
    """The pod once it has a node."""
    found: JSON = {}

    async def bound() -> bool:
        found.update(await kc.get(f"/api/v1/namespaces/{ns}/pods/{name}"))
        return bool(found["spec"].get("nodeName"))

    await wait_for(f"pod {ns}/{name} bound", bound, timeout_s)
    return found


async def scheduling_events(kc: KubeClient, ns: str, name: str) -> list[str]:
    """Messages of the pod's FailedScheduling events."""
    path = f"/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name%3D{name}"
    items = (await kc.get(path))["items"]
    return [e["message"] for e in items if e.get("reason") == "FailedScheduling"]


def devices_of(pod: JSON) -> tuple[int, ...]:
    """The devices the extender wrote on a bound pod."""
    return tuple(int(i) for i in pod["metadata"]["annotations"][wire.DEVICES].split(","))


def start_kube_scheduler(
    bin_dir: Path, config: dict[str, Any], kubeconfig: str, workdir: Path
) -> subprocess.Popen[bytes]:
    """Run another kube-scheduler with `config` against the cluster of `kubeconfig`."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = {
        **config,
        "clientConnection": {"kubeconfig": kubeconfig, **config.get("clientConnection", {})},
    }
    (workdir / "kube-scheduler.yaml").write_text(render(config))
    argv = [
        str(bin_dir / "kube-scheduler"),
        f"--config={workdir / 'kube-scheduler.yaml'}",
        "--bind-address=127.0.0.1",
        f"--secure-port={free_ports(1)[0]}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
    ]
    with (workdir / "kube-scheduler.log").open("wb") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


# ----------------------------------------------------------------------------- fixtures


@dataclass
class Stack:
    cluster: ClusterState
    extender: ExtenderProcess


async def add_node(cs: ClusterState, node: JSON) -> None:
    """Create a kwok node (already there is fine) and wait until it is Ready and untainted."""
    name = node["metadata"]["name"]
    async with cs.client() as kc:
        try:
            await kc.post("/api/v1/nodes", node)
        except KubeError as exc:
            if exc.status != 409:
                raise

        async def ready() -> bool:
            return not await unready_nodes(kc, [name])

        await wait_for(f"{name} Ready and untainted", ready, 60)


def start_stack(
    factory: K8sEnvFactory, workdir: Path, node: Callable[[ClusterState], JSON], *extra: str
) -> Iterator[Stack]:
    """One cluster whose kube-scheduler calls a `suanpan-extender` started with `extra`
    arguments, plus the node `node(cluster)` builds; the extender stops at the end."""
    port = free_ports(1)[0]
    cs = factory(1, f"http://127.0.0.1:{port}").clusters[0]
    extender = ExtenderProcess.start(cs.kubeconfig, port, workdir / "log", "suanpan", *extra)
    try:
        asyncio.run(add_node(cs, node(cs)))
        asyncio.run(extender.wait_ready())
        yield Stack(cs, extender)
    finally:
        extender.stop()


def box16_stack(factory: K8sEnvFactory, workdir: Path, *extra: str) -> Iterator[Stack]:
    """`start_stack` with the Box16 node `e2e-b16`."""
    labels = {"accelerator": "huawei-Ascend910", "accelerator-type": "module-910b-16"}
    yield from start_stack(
        factory,
        workdir,
        lambda cs: node_manifest(cs.name, BOX16, {B3_RESOURCE: 16}, **labels),
        *extra,
    )


@pytest.fixture(scope="module")
def stack(
    k8s_env_factory: K8sEnvFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The cluster with the Box16 node."""
    yield from box16_stack(k8s_env_factory, tmp_path_factory.mktemp("ext"))


async def create(kc: KubeClient, ns: str, pod: JSON) -> None:
    await kc.post(f"/api/v1/namespaces/{ns}/pods", pod)


# -------------------------------------------------------------------------------- tests


async def test_pods_land_on_the_right_nodes_and_exact_devices(kc: KubeClient, ns: str) -> None:
    await create(kc, ns, pod_manifest("twelve", 12))
    twelve = await wait_bound(kc, ns, "twelve")
    assert twelve["spec"]["nodeName"] == BOX16  # the only node with 12 NPUs
    assert devices_of(twelve) == (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13)  # 6 + 6 over the rings
    assert twelve["metadata"]["annotations"][wire.BOUND_NODE] == BOX16

    await create(kc, ns, pod_manifest("plain-eight", 8, flavor=None))  # from requests only
    await create(
        kc, ns, pod_manifest("gpus", 2, resource="nvidia.com/gpu", flavor="nvidia/H100-80GB")
    )
    eight = await wait_bound(kc, ns, "plain-eight")
    assert eight["spec"]["nodeName"] == ASCEND8 and devices_of(eight) == tuple(range(8))
    gpus = await wait_bound(kc, ns, "gpus")
    assert gpus["spec"]["nodeName"].startswith("bj-h100-")
    assert len(set(devices_of(gpus))) == 2 and set(devices_of(gpus)) <= set(range(8))


async def test_topology_rejection_reason_reaches_the_pod_events(kc: KubeClient, ns: str) -> None:
    await create(kc, ns, pod_manifest("nine", 9))  # 9 NPUs: never on a Box16
    messages: list[str] = []

    async def rejected() -> bool:
        messages[:] = await scheduling_events(kc, ns, "nine")
        return any("9 devices not allowed by topology" in m for m in messages)

    await wait_for(
        "FailedScheduling naming the topology", rejected, 30, explain=lambda: str(messages)
    )
    pod = await kc.get(f"/api/v1/namespaces/{ns}/pods/nine")
    assert not pod["spec"].get("nodeName")
    assert any(
        f"{B3}: 9 devices not allowed by topology (1,2,3,4,5,6,7,8,10,12,14,16)" in m
        for m in messages
    )


async def test_the_scheduler_really_calls_the_extender(
    kc: KubeClient, ns: str, stack: Stack
) -> None:
    before = await stack.extender.metrics()
    sched_url = stack.cluster.url("kube-scheduler") + "/metrics"
    status, text = await kc.probe(sched_url)
    assert status == 200
    attempts = "scheduler_schedule_attempts_total{profile=suanpan-scheduler,result=scheduled}"
    scheduled_before = parse_metrics(text).get(attempts, 0.0)

    # fits several nodes, but filter keeps the one it goes to: kube-scheduler takes it without
    # scoring, so prioritize is not asked
    await create(kc, ns, pod_manifest("one", 1))
    pod = await wait_bound(kc, ns, "one")
    assert wire.DEVICES in pod["metadata"]["annotations"]  # only the extender writes it

    after = await stack.extender.metrics()
    calls = {
        verb: after.get(key, 0.0) - before.get(key, 0.0)
        for verb in ("filter", "prioritize", "bind")
        for key in [f"suanpan_extender_calls_total{{verb={verb}}}"]
    }
    assert calls["filter"] >= 1 and calls["bind"] >= 1 and calls["prioritize"] == 0, calls
    status, text = await kc.probe(sched_url)
    assert parse_metrics(text)[attempts] > scheduled_before
    sched_log = Path(
        next(p.log for p in stack.cluster.processes if p.name.endswith("kube-scheduler"))
    )
    assert f'pod="{ns}/one"' in await asyncio.to_thread(sched_log.read_text)


async def test_concurrent_pods_never_share_a_device(kc: KubeClient, ns: str) -> None:
    names = [f"pair-{i}" for i in range(14)]  # 28 NPUs asked, 24 exist (8 + 16)
    await asyncio.gather(*(create(kc, ns, pod_manifest(n, 2)) for n in names))
    bound: list[JSON] = []

    async def twelve_bound() -> bool:
        items = (await kc.get(f"/api/v1/namespaces/{ns}/pods"))["items"]
        bound[:] = [p for p in items if p["spec"].get("nodeName")]
        return len(bound) == 12

    await wait_for("12 of 14 pairs bound", twelve_bound, 90, explain=lambda: str(len(bound)))
    taken = [(p["spec"]["nodeName"], d) for p in bound for d in devices_of(p)]
    assert len(taken) == len(set(taken)) == 24
    for p in bound:
        assert p["metadata"]["annotations"][wire.BOUND_NODE] == p["spec"]["nodeName"]


async def _priority_class(kc: KubeClient, name: str, value: int) -> None:
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    try:
        await kc.post("/apis/scheduling.k8s.io/v1/priorityclasses", body)
    except KubeError as exc:
        if exc.status != 409:
            raise


async def test_priority_preemption_evicts_a_lower_priority_pod(kc: KubeClient, ns: str) -> None:
    await _priority_class(kc, "suanpan-e2e-low", 100)
    await _priority_class(kc, "suanpan-e2e-high", 100_000)
    await create(kc, ns, pod_manifest("low", 8, priority_class="suanpan-e2e-low", node=ASCEND8))
    low = await wait_bound(kc, ns, "low")
    await create(kc, ns, pod_manifest("high", 8, priority_class="suanpan-e2e-high", node=ASCEND8))
    high = await wait_bound(kc, ns, "high", timeout_s=90)
    assert high["spec"]["nodeName"] == ASCEND8 and devices_of(high) == tuple(range(8))
    with pytest.raises(KubeError) as gone:
        await kc.get(f"/api/v1/namespaces/{ns}/pods/low")
    assert gone.value.status == 404  # the victim was evicted and is gone
    assert devices_of(low) == tuple(range(8))
    path = f"/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name%3Dlow"
    reasons = {e["reason"]: e["message"] for e in (await kc.get(path))["items"]}
    preempted = f"Preempted by pod {high['metadata']['uid']} on node {ASCEND8}"
    assert reasons["Preempted"] == preempted  # kube-scheduler's own preemption did it


PROD_PROFILE = "suanpan-prod-check"


@pytest.fixture
def production_scheduler(stack: Stack, k8s_bin_dir: Path, tmp_path: Path) -> Iterator[str]:
    """A second kube-scheduler running deploy/scheduler's generated config (own profile name,
    this cluster's kubeconfig, our extender's URL); yields the profile name."""
    config = scheduler_config(load_catalog(), url=stack.extender.url, scheduler_name=PROD_PROFILE)
    proc = start_kube_scheduler(k8s_bin_dir, config, stack.cluster.kubeconfig, tmp_path)
    yield PROD_PROFILE
    proc.terminate()
    proc.wait(10)


async def test_production_config_drives_a_real_kube_scheduler(
    kc: KubeClient, ns: str, production_scheduler: str
) -> None:
    """The generated config validates and works; a HAMi-style share asking for
    `nvidia.com/gpumem` (which no node advertises) is scheduled, because the config tells
    kube-scheduler to leave amounts to the extender."""
    share = pod_manifest("share", 1, resource="nvidia.com/gpu", flavor="nvidia/H100-80GB")
    share["spec"]["schedulerName"] = production_scheduler
    request = {"count": 1, "milli": 300, "memoryMib": 20000}
    share["metadata"]["annotations"][wire.DEVICE_REQUEST] = json.dumps(request)
    for part in ("requests", "limits"):
        share["spec"]["containers"][0]["resources"][part]["nvidia.com/gpumem"] = "20000"
    await create(kc, ns, share)
    pod = await wait_bound(kc, ns, "share")
    assert pod["spec"]["nodeName"].startswith("bj-h100-") and len(devices_of(pod)) == 1
