"""What the hub decides is what the cluster runs: the real agent code, kube-scheduler, extender.

One local cluster (`dc-beijing` of the profile: two HAMi H100 nodes, an Ascend 910B3 node
registered by HAMi's Ascend plugin, MLU, DCU and a CPU-only node) plus `e2e-mind`, an Ascend
node served by MindCluster (`huawei.com/Ascend910`). Pods are rendered and created by the
agent's own code (`render`, `KubernetesBackend`, `Agent.reconcile`); only the hub is replaced,
by a recorder of the status reports. `suanpan-extender` runs with `--gang-wait 4` (the
harness's kube-scheduler calls it with a 10 s httpTimeout).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.render import render
from cluster_agents.backends.kubernetes import KubernetesBackend
from deploy.local.clusters import ClusterState
from deploy.local.kube import JSON, KubeClient, wait_for
from federation.catalog import load_catalog
from federation.k8s_names import tenant_namespace
from federation.wire import annotations as wire
from federation.wire.agent import Assignment, StatusAck, StatusReport, StatusUpdate
from tests.compiled_jobs import assignment
from tests.e2e.conftest import K8sEnvFactory, fresh_namespace
from tests.e2e.test_extender import Stack, node_manifest, pod_manifest, start_stack

pytestmark = pytest.mark.e2e

CATALOG = load_catalog()
MIND = "e2e-mind"
MIND_CHIPS = ",".join(f"Ascend910-{i}" for i in range(8))
GANG_WAIT_S = 4


def mindcluster_node(cluster: str) -> JSON:
    """An Ascend 910B3 server whose NPUs MindCluster's plugin serves as huawei.com/Ascend910."""
    node = node_manifest(
        cluster,
        MIND,
        {"huawei.com/Ascend910": 8},
        **{
            "accelerator": "huawei-Ascend910",
            "accelerator-type": "module-910b-8",
            "node.kubernetes.io/npu.chip.name": "910B3",
        },
    )
    node["metadata"]["annotations"]["huawei.com/Ascend910"] = MIND_CHIPS  # healthy chips
    return node


@pytest.fixture(scope="module")
def stack(
    k8s_env_factory: K8sEnvFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from start_stack(
        k8s_env_factory,
        tmp_path_factory.mktemp("ext"),
        lambda cs: mindcluster_node(cs.name),
        "--gang-wait",
        str(GANG_WAIT_S),
    )


@pytest.fixture
async def ns(kc: KubeClient) -> AsyncIterator[str]:
    """A fresh namespace of tenant `t` (the assignments' tenant) under a fresh agent prefix."""
    async for name in fresh_namespace(kc, tenant_namespace(f"e2e-{uuid.uuid4().hex[:8]}", "t")):
        yield name


def prefix_of(ns: str) -> str:
    """The agent prefix whose tenant `t` has namespace `ns`."""
    prefix = ns.removesuffix("-t")
    assert tenant_namespace(prefix, "t") == ns
    return prefix


class Hub:
    """Stands in for the hub: records what the agent reports."""

    def __init__(self) -> None:
        self.updates: list[StatusUpdate] = []

    async def status(self, report: StatusReport) -> StatusAck:
        self.updates.extend(report.updates)
        return StatusAck(applied=len(report.updates), duplicate=0, stale=0)

    async def close(self) -> None:
        return None


@dataclass
class RunningAgent:
    """The production agent's reconcile over the production backend (no hub session)."""

    agent: Agent
    backend: KubernetesBackend
    hub: Hub = field(default_factory=Hub)

    @classmethod
    async def start(cls, cs: ClusterState, ns: str, *jobs: Assignment) -> RunningAgent:
        backend = KubernetesBackend(cs.kubeconfig, prefix_of(ns), CATALOG)
        await backend.start()
        hub = Hub()
        config = AgentConfig("e2e", namespace=prefix_of(ns))
        agent = Agent(config, backend, CATALOG, hub)  # type: ignore[arg-type]
        agent.caught_up = True
        for job in jobs:
            agent.active[str(job.job)] = job
        return cls(agent, backend, hub)

    async def drive(self, what: str, done: Any, timeout_s: float = 60) -> None:
        """Reconcile (as the agent's loop does on every change) until `done()` holds."""

        async def step() -> bool:
            await self.agent.reconcile()
            return bool(await done())

        await wait_for(what, step, timeout_s)

    async def stop(self) -> None:
        await self.backend.stop()


def job(flavor: str | None, accelerators: dict[str, Any], replicas: int, gang: bool) -> Assignment:
    task: dict[str, Any] = {"name": "w", "replicas": replicas, "image": "train:1"}
    task["resources"] = {"cpu": "1", "memory": "1Gi"}
    if flavor:
        task["resources"]["accelerators"] = {**accelerators, "anyOf": [{"flavor": flavor}]}
    return assignment(CATALOG, [task], {"w": flavor}, gang=gang)


async def pods_of(kc: KubeClient, ns: str) -> list[JSON]:
    return list((await kc.get(f"/api/v1/namespaces/{ns}/pods"))["items"])


async def node(kc: KubeClient, name: str) -> JSON:
    return dict(await kc.get(f"/api/v1/nodes/{name}"))


def devices_of(pod: JSON) -> list[int]:
    return [int(i) for i in pod["metadata"]["annotations"][wire.DEVICES].split(",")]


def registered(node_obj: JSON, key: str) -> list[str]:
    """Device ids of a HAMi register annotation, by index."""
    entries = json.loads(node_obj["metadata"]["annotations"][key])
    return [e["id"] for e in sorted(entries, key=lambda e: e.get("index", 0))]


async def run_alone(stack: Stack, ns: str, *jobs: Assignment, until: int) -> list[JSON]:
    """Create the jobs' pods with the agent and wait until `until` pods are bound."""
    ran = await RunningAgent.start(stack.cluster, ns, *jobs)
    found: list[JSON] = []
    async with stack.cluster.client() as kc:

        async def bound() -> bool:
            found[:] = [p for p in await pods_of(kc, ns) if p["spec"].get("nodeName")]
            return len(found) >= until

        try:
            await ran.drive(f"{until} pods bound", bound)
        finally:
            await ran.stop()
    return found


# ------------------------------------------------------------------- exact devices and shares


async def test_nvidia_whole_and_fractional_jobs_carry_the_chosen_gpus_uuids(
    stack: Stack, kc: KubeClient, ns: str
) -> None:
    whole = job("nvidia/H100-80GB", {"count": 2}, 1, gang=False)
    half = job("nvidia/H100-80GB", {"fraction": 0.5, "minMemory": "20Gi"}, 1, gang=False)
    pods = await run_alone(stack, ns, whole, half, until=2)
    by_job = {p["metadata"]["labels"][wire.JOB_LABEL]: p for p in pods}
    for placed, mem, cores in ((whole, 81559, 100), (half, 20480, 50)):
        pod = by_job[str(placed.job)]
        notes = pod["metadata"]["annotations"]
        ids = registered(await node(kc, pod["spec"]["nodeName"]), "hami.io/node-nvidia-register")
        chosen = [ids[i] for i in devices_of(pod)]
        expected = "".join(f"{i},NVIDIA,{mem},{cores}:" for i in chosen) + ";"
        assert notes["hami.io/vgpu-devices-to-allocate"] == expected
        assert notes["hami.io/vgpu-node"] == pod["spec"]["nodeName"]
        assert notes["hami.io/bind-phase"] == "allocating" and notes["hami.io/bind-time"]
    requests = by_job[str(half.job)]["spec"]["containers"][0]["resources"]["requests"]
    assert (requests["nvidia.com/gpu"], requests["nvidia.com/gpucores"]) == ("1", "50")
    assert requests["nvidia.com/gpumem"] == "20480"  # no node advertises it: the extender counts


async def test_ascend_gets_hamis_annotation_or_mindclusters_by_the_nodes_plugin(
    stack: Stack, kc: KubeClient, ns: str
) -> None:
    whole = job("huawei/Ascend910B3", {"count": 4}, 1, gang=False)
    quarter = job("huawei/Ascend910B3", {"fraction": 0.25, "minMemory": "16Gi"}, 1, gang=False)
    pods = await run_alone(stack, ns, whole, quarter, until=2)
    ids = registered(await node(kc, "bj-ascend-0"), "hami.io/node-register-Ascend910B3")
    by_job = {p["metadata"]["labels"][wire.JOB_LABEL]: p for p in pods}
    for placed, mem, cores in ((whole, 65536, 100), (quarter, 16384, 25)):
        pod = by_job[str(placed.job)]
        assert pod["spec"]["nodeName"] == "bj-ascend-0"
        chosen = [ids[i] for i in devices_of(pod)]
        assert pod["metadata"]["annotations"]["hami.io/Ascend910B3-devices-to-allocate"] == (
            "".join(f"{i},Ascend910B3,{mem},{cores}:" for i in chosen) + ";"
        )

    mind = pod_manifest("mind", 2, resource="huawei.com/Ascend910", node=MIND)
    await kc.post(f"/api/v1/namespaces/{ns}/pods", mind)

    async def bound() -> bool:
        mind.update(await kc.get(f"/api/v1/namespaces/{ns}/pods/mind"))
        return bool(mind["spec"].get("nodeName"))

    await wait_for("MindCluster pod bound", bound, 60)
    notes = mind["metadata"]["annotations"]
    assert notes["huawei.com/Ascend910"] == ",".join(f"Ascend910-{i}" for i in devices_of(mind))
    assert int(notes["predicate-time"]) <= time.time()


async def test_a_visible_devices_variable_reads_the_devices_the_extender_chose(
    stack: Stack, ns: str
) -> None:
    (pod,) = await run_alone(
        stack, ns, job("cambricon/MLU370-X8", {"count": 2}, 1, gang=False), until=1
    )
    assert pod["metadata"]["annotations"]["suanpan.io/visible-devices"] == ",".join(
        map(str, devices_of(pod))
    )
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["MLU_VISIBLE_DEVICES"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['suanpan.io/visible-devices']"
    )


# ------------------------------------------------------------------------------------- gangs


@dataclass
class Watch:
    """Samples the namespace's pods every 50 ms: any moment a pod ran while another was
    unbound, and when each pod was first seen bound."""

    violations: list[str] = field(default_factory=list)
    bound_at: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    sampled: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, kc: KubeClient, ns: str) -> None:
        while True:
            pods = await pods_of(kc, ns)
            now = time.monotonic()
            self.samples += 1
            running = [p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"]
            unbound = [p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")]
            if running and unbound:
                self.violations.append(f"running {running} while {unbound} unbound")
            for p in pods:
                if p["spec"].get("nodeName"):
                    self.bound_at.setdefault(p["metadata"]["name"], now)
            self.sampled.set()
            await asyncio.sleep(0.05)

    async def settle(self) -> None:
        """Return after two more samples (everything seen so far is recorded)."""
        for _ in range(2):
            self.sampled.clear()
            await self.sampled.wait()


@pytest.fixture
async def watch(kc: KubeClient, ns: str) -> AsyncIterator[Watch]:
    seen = Watch()
    task = asyncio.create_task(seen.run(kc, ns))
    yield seen
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _kill_after_first_pod(stack: Stack, ns: str, gang: Assignment) -> None:
    """An agent that created one pod of the gang and died before the others."""
    first = await RunningAgent.start(stack.cluster, ns)
    await first.backend.create_pods(render(gang, prefix_of(ns), CATALOG)[:1])
    await first.stop()


@pytest.mark.parametrize(
    ("flavor", "count", "size"),
    [("huawei/Ascend910B3", 2, 4), ("nvidia/H100-80GB", 1, 16)],  # all of bj-ascend-0; 2 x 8 GPUs
    ids=["ascend-4", "nvidia-16"],
)
async def test_a_gang_that_fits_binds_whole_across_an_agent_restart(
    stack: Stack, kc: KubeClient, ns: str, watch: Watch, flavor: str, count: int, size: int
) -> None:
    gang = job(flavor, {"count": count}, size, gang=True)
    await _kill_after_first_pod(stack, ns, gang)
    await asyncio.sleep(2)
    (lonely,) = await pods_of(kc, ns)
    assert lonely["spec"]["schedulingGates"] == [{"name": wire.GANG_GATE}]
    assert not lonely["spec"].get("nodeName") and not watch.bound_at

    again = await RunningAgent.start(stack.cluster, ns, gang)
    started = time.monotonic()

    async def all_running() -> bool:
        pods = await pods_of(kc, ns)
        return len(pods) == size and all(p["status"].get("phase") == "Running" for p in pods)

    try:
        await again.drive("the gang running", all_running)
    finally:
        await again.stop()
    await watch.settle()
    pods = await pods_of(kc, ns)
    taken = [(p["spec"]["nodeName"], d) for p in pods for d in devices_of(p)]
    assert len(taken) == len(set(taken)) == count * size
    spread = max(watch.bound_at.values()) - min(watch.bound_at.values())
    assert len(watch.bound_at) == size and spread < 2.0  # the Bindings were created together
    (waited,) = [
        line.rsplit("after ", 1)[1]
        for line in stack.extender.log.read_text().splitlines()
        if f"gang {gang.job}-e1: binding {size} members" in line
    ]
    print(
        f"gang of {size}: the first member's devices were reserved {waited} before the "
        "Bindings (the window in which a pod of another scheduler could take them); running "
        f"{time.monotonic() - started:.2f} s after the restart; first to last bound "
        f"{spread * 1000:.0f} ms apart; {len(watch.violations)} of {watch.samples} samples saw "
        "a pod Running (kwok starts it at once) while a member's Binding was in flight"
    )


async def test_a_gang_that_does_not_fit_never_runs_a_replica(
    stack: Stack, kc: KubeClient, ns: str, watch: Watch
) -> None:
    gang = job("huawei/Ascend910B3", {"count": 8}, 2, gang=True)  # 16 NPUs; the cluster has 8
    before = await stack.extender.metrics()
    await _kill_after_first_pod(stack, ns, gang)
    again = await RunningAgent.start(stack.cluster, ns, gang)

    async def said_why() -> bool:
        return any(u.reason == "Unschedulable" for u in again.hub.updates)

    try:
        await again.drive("the agent reporting why the gang waits", said_why)
        deadline = time.monotonic() + 3 * GANG_WAIT_S
        while time.monotonic() < deadline:  # several bind timeouts and kube-scheduler retries
            await again.agent.reconcile()
            await asyncio.sleep(0.5)
    finally:
        await again.stop()
    assert not watch.bound_at and watch.violations == [] and watch.samples > 50
    assert all(not p["spec"].get("schedulingGates") for p in await pods_of(kc, ns))
    after = await stack.extender.metrics()
    key = "suanpan_extender_gang_timeouts_total{}"
    assert after[key] > before.get(key, 0.0)
    waiting = [u for u in again.hub.updates if u.reason == "Unschedulable"]
    assert waiting[0].state == "Applied" and waiting[0].message.startswith("0/")
    print(f"why: {waiting[0].message}; gang timeouts: {after[key] - before.get(key, 0.0):g}")


# ------------------------------------------------------------------ CPU-only roles, reasons


async def test_cpu_only_pods_stay_off_accelerator_nodes(stack: Stack, ns: str) -> None:
    pods = await run_alone(stack, ns, job(None, {}, 6, gang=False), until=6)
    assert {p["spec"]["nodeName"] for p in pods} == {"bj-cpu-0"}
    term = pods[0]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]
    assert {"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"} in term["matchExpressions"]


async def test_the_schedulers_reason_for_a_pod_that_cannot_fit_reaches_the_report(
    stack: Stack, ns: str
) -> None:
    nine = job("huawei/Ascend910B3", {"count": 9}, 1, gang=False)
    ran = await RunningAgent.start(stack.cluster, ns, nine)

    async def reported() -> bool:
        return any(u.reason == "Unschedulable" for u in ran.hub.updates)

    try:
        await ran.drive("the scheduler's reason reported", reported)
    finally:
        await ran.stop()
    (update,) = [u for u in ran.hub.updates if u.reason == "Unschedulable"]
    assert (update.state, update.job, update.epoch) == ("Applied", nine.job, 1)
    assert update.message.startswith("0/") and "huawei.com/Ascend910B3" in update.message
