"""The agent's Kubernetes backend against a real local cluster (deploy/local).

Everything the tests create is pinned to nodes this module adds with a taint of its own,
so other modules sharing the session's clusters never see our pods on their nodes; pods
are bound by kube-scheduler's default profile (no extender needed), kwok runs them.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
import yaml
from aiohttp import web

from cluster_agents.agent.backend import PodSpec, PodStatus, Toleration
from cluster_agents.backends.kubernetes import KubernetesBackend
from deploy.local.clusters import ClusterState, Environment
from deploy.local.kube import KubeError, ssl_context
from federation.catalog import load_catalog
from federation.k8s_names import tenant_namespace
from federation.podtemplate import PodTemplate
from federation.wire import annotations as ann
from federation.wire.agent import DeviceInfo, NodeInfo

pytestmark = pytest.mark.e2e

T = TypeVar("T")
CATALOG = load_catalog()
PREFIX = f"kb-e2e-{uuid.uuid4().hex[:6]}"  # the backend's tenant namespace prefix
NS = tenant_namespace(PREFIX, "t")  # where the pods of tenant "t" go
ASCEND = "huawei.com/Ascend910B3"
TAINT = "suanpan.io/e2e-backend"
ASCEND_NODE, CPU_NODE, EXTRA_NODE = "kb-ascend-0", "kb-cpu-0", "kb-extra-0"
WHOLE_910B3 = (1000, 65536)
# What the catalog makes of the first profile cluster's nodes.
PROFILE_DEVICES = {
    "bj-h100-0": ("nvidia/H100-80GB", 8, 81559),
    "bj-h100-1": ("nvidia/H100-80GB", 8, 81559),
    "bj-ascend-0": ("huawei/Ascend910B3", 8, 65536),
    "bj-mlu-0": ("cambricon/MLU370-X8", 8, 24576),
    "bj-dcu-0": ("hygon/K100-AI", 8, 65536),
    "bj-cpu-0": None,
}


def node_manifest(
    name: str, allocatable: Mapping[str, str], capacity: Mapping[str, str]
) -> dict[str, Any]:
    """A kwok node carrying our taint."""
    base = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "node.kubernetes.io/npu.chip.name": "910B3"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]},
        "status": {"allocatable": {**base, **allocatable}, "capacity": {**base, **capacity}},
    }


async def eventually(check: Callable[[], T | None], what: str, timeout_s: float = 20.0) -> T:
    """Poll `check` until it returns something truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} (last: {result!r})")
        await asyncio.sleep(0.05)


async def listed(cs: ClusterState, path: str) -> list[dict[str, Any]]:
    async with cs.client() as client:
        items: list[dict[str, Any]] = (await client.get(path))["items"]
        return items


@pytest.fixture(scope="module")
def cluster(k8s_clusters: Environment) -> Iterator[ClusterState]:
    """The first cluster plus our two tainted nodes; nodes and namespace removed afterwards."""
    cs = k8s_clusters.clusters[0]

    async def setup() -> None:
        async with cs.client() as client:
            await client.post(
                "/api/v1/nodes", node_manifest(ASCEND_NODE, {ASCEND: "7"}, {ASCEND: "8"})
            )
            await client.post("/api/v1/nodes", node_manifest(CPU_NODE, {}, {}))

    async def teardown() -> None:
        async with cs.client() as client:
            for path in (
                f"/api/v1/nodes/{ASCEND_NODE}",
                f"/api/v1/nodes/{CPU_NODE}",
                f"/api/v1/namespaces/{NS}",
            ):
                try:
                    await client.delete(path)
                except KubeError as exc:
                    if exc.status != 404:
                        raise

    asyncio.run(setup())
    try:
        yield cs
    finally:
        asyncio.run(teardown())


@pytest.fixture
async def backend(cluster: ClusterState) -> AsyncIterator[KubernetesBackend]:
    b = KubernetesBackend(cluster.kubeconfig, PREFIX, CATALOG)
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


def spec(
    job: str,
    replica: int,
    node: str,
    *,
    annotations: Mapping[str, str] | None = None,
    requests: Mapping[str, str] | None = None,
) -> PodSpec:
    """A Suanpan pod pinned to one of our nodes, bound by the default scheduler."""
    return PodSpec(
        name=f"sp-{job[:8]}-e1-worker-{replica}",
        namespace=NS,
        tenant="t",
        job=job,
        epoch=1,
        task="worker",
        replica=replica,
        template=PodTemplate.model_validate({"spec": {"containers": [{"name": "worker"}]}}),
        container="worker",
        cpu_milli=1000,
        memory_mib=1024,
        image="registry.local/train:1",
        labels={
            ann.MANAGED_LABEL: "true",
            ann.JOB_LABEL: job,
            ann.TASK_LABEL: "worker",
            ann.REPLICA_LABEL: str(replica),
            ann.EPOCH_LABEL: "1",
        },
        annotations=dict(annotations or {}),
        requests=dict(requests or {"cpu": "1", "memory": "1Gi"}),
        node_selector={"kubernetes.io/hostname": node},
        tolerations=(Toleration(TAINT, "NoSchedule", "true"),),
        priority=500,
        priority_class="suanpan-e2e-batch",
        scheduler_name="default-scheduler",
    )


def job_id() -> str:
    return str(uuid.uuid4())


def node_named(b: KubernetesBackend, name: str) -> NodeInfo | None:
    return next((n for n in b.nodes() if n.name == name), None)


def pods_of(b: KubernetesBackend, job: str) -> list[PodStatus]:
    return [p for p in b.pods() if p.job == job]


TERMINAL = ("Succeeded", "Failed")


def usage(devices: list[DeviceInfo]) -> list[tuple[int, int]]:
    return [(d.used_milli, d.used_memory_mib) for d in devices]


# ------------------------------------------------------------------------------------ nodes


async def test_nodes_match_the_cluster(backend: KubernetesBackend, cluster: ClusterState) -> None:
    assert (await backend.facts()).kubernetes_version.startswith("v1.")
    for name, expected in PROFILE_DEVICES.items():
        got = node_named(backend, name)
        assert got is not None and got.ready and not got.taints, name
        assert (got.cpu_milli, got.memory_mib, got.pods) == (128_000, 1024 * 1024, 110), name
        assert got.labels["suanpan.io/cluster"] == cluster.name
        described = {(d.flavor, d.memory_mib, d.healthy) for d in got.devices}
        if expected is None:
            assert got.devices == [], name
        else:
            flavor, count, memory = expected
            assert (described, len(got.devices)) == ({(flavor, memory, True)}, count), name

    async def pods_per_node() -> dict[str, int]:
        """Every node with the number of non-terminal pods bound to it, from the API."""
        counts = {n["metadata"]["name"]: 0 for n in await listed(cluster, "/api/v1/nodes")}
        for pod in await listed(cluster, "/api/v1/pods"):
            node = pod["spec"].get("nodeName")
            if node in counts and pod["status"].get("phase") not in TERMINAL:
                counts[node] += 1
        return counts

    for _ in range(50):  # other modules' pods may be moving on: compare until they agree
        expected_counts = await pods_per_node()
        if {n.name: n.used_pods for n in backend.nodes()} == expected_counts:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"nodes() never agreed with the API: {expected_counts}")


async def test_devices_used_by_anyone_show_as_used(
    backend: KubernetesBackend, cluster: ClusterState
) -> None:
    job = job_id()
    whole = spec(
        job,
        0,
        ASCEND_NODE,
        annotations={
            ann.FLAVOR: "huawei/Ascend910B3",
            ann.DEVICE_REQUEST: '{"count":2,"milli":1000,"memoryMib":0}',
            ann.DEVICES: "0,1",  # as the extender writes it at bind
        },
        requests={"cpu": "1", "memory": "1Gi", ASCEND: "2"},
    )
    share = spec(
        job,
        1,
        ASCEND_NODE,
        annotations={
            ann.FLAVOR: "huawei/Ascend910B3",
            ann.DEVICE_REQUEST: '{"count":1,"milli":250,"memoryMib":16384}',
            ann.DEVICES: "4",
        },
        requests={"cpu": "1", "memory": "1Gi", ASCEND: "1"},
    )
    foreign = {  # what `kubectl run` with a device request would create
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"foreign-{job[:8]}", "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi", ASCEND: "2"},
                        "limits": {ASCEND: "2"},
                    },
                }
            ],
            "nodeSelector": {"kubernetes.io/hostname": ASCEND_NODE},
            "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    await backend.create_pods([whole, share])
    async with cluster.client() as client:
        await client.post("/api/v1/namespaces/default/pods", foreign)
    try:
        expected = [WHOLE_910B3] * 4 + [(250, 16384)] + [(0, 0)] * 3

        def settled() -> NodeInfo | None:
            n = node_named(backend, ASCEND_NODE)
            return n if n and n.used_pods == 3 and usage(n.devices) == expected else None

        n = await eventually(settled, "devices 0-1 (ours), 2-3 (foreign), 4 shared")
        assert [d.healthy for d in n.devices] == [True] * 7 + [False]  # allocatable 7 of 8
        assert (n.used_cpu_milli, n.used_memory_mib) == (2500, 3 * 1024)
    finally:
        async with cluster.client() as client:
            await client.delete(f"/api/v1/namespaces/default/pods/foreign-{job[:8]}")
        await backend.delete_pods([whole.name, share.name], 0)
    await eventually(
        lambda: (n := node_named(backend, ASCEND_NODE)) and n.used_pods == 0, "node freed"
    )


async def test_node_added_and_removed_within_seconds(
    backend: KubernetesBackend, cluster: ClusterState
) -> None:
    backend.changed.clear()
    start = time.monotonic()
    async with cluster.client() as client:
        await client.post(
            "/api/v1/nodes", node_manifest(EXTRA_NODE, {ASCEND: "16"}, {ASCEND: "16"})
        )
    await asyncio.wait_for(backend.changed.wait(), 5)
    added = await eventually(lambda: node_named(backend, EXTRA_NODE), "node added", 5)
    assert [d.index for d in added.devices] == list(range(16))
    backend.changed.clear()
    async with cluster.client() as client:
        await client.delete(f"/api/v1/nodes/{EXTRA_NODE}")
    await asyncio.wait_for(backend.changed.wait(), 5)
    await eventually(lambda: node_named(backend, EXTRA_NODE) is None, "node removed", 5)
    assert time.monotonic() - start < 10


# ------------------------------------------------------------------------------------- pods


async def test_create_pods_is_idempotent_and_pods_run_to_completion(
    backend: KubernetesBackend, cluster: ClusterState
) -> None:
    job = job_id()
    specs = [spec(job, r, CPU_NODE, annotations={ann.RUN_SECONDS: "2"}) for r in range(2)]
    # concurrently (both see the pods missing: the apiserver answers 409 to one), then again
    await asyncio.gather(backend.create_pods(specs), backend.create_pods(specs))
    await backend.create_pods(specs)
    pods = await listed(
        cluster, f"/api/v1/namespaces/{NS}/pods?labelSelector={ann.JOB_LABEL}={job}"
    )
    assert sorted(p["metadata"]["name"] for p in pods) == [s.name for s in specs]
    async with cluster.client() as client:
        owner = await client.get(f"/api/v1/namespaces/{NS}/configmaps/suanpan-{job}-e1")
        priority = await client.get("/apis/scheduling.k8s.io/v1/priorityclasses/suanpan-e2e-batch")
        namespace = await client.get(f"/api/v1/namespaces/{NS}")
    assert (
        namespace["metadata"]["labels"]
        | {
            ann.MANAGED_LABEL: "true",
            ann.TENANT_LABEL: "t",
        }
        == namespace["metadata"]["labels"]
    )  # created by the backend, labelled as Suanpan's
    assert {p["metadata"]["ownerReferences"][0]["uid"] for p in pods} == {owner["metadata"]["uid"]}
    assert (priority["value"], priority["preemptionPolicy"]) == (500, "Never")
    assert {p["spec"]["priority"] for p in pods} == {500}

    running = await eventually(
        lambda: [p for p in pods_of(backend, job) if p.phase == "Running"] or None, "Running"
    )
    assert {(p.node, p.reason) for p in running} == {(CPU_NODE, "")}
    done = await eventually(
        lambda: len(ps := pods_of(backend, job)) == 2 and all(p.phase == "Succeeded" for p in ps),
        "both Succeeded",
    )
    assert done
    created = backend.metrics.registry.get_sample_value(
        "suanpan_agent_kube_api_seconds_count", {"call": "create_namespaced_pod", "code": "201"}
    )
    assert created and created >= 2
    await backend.delete_pods([s.name for s in specs], 0)


async def test_failure_and_scheduling_reasons(backend: KubernetesBackend) -> None:
    job = job_id()
    oom = spec(job, 0, CPU_NODE, annotations={ann.FAIL_REASON: "OOMKilled"})
    too_big = spec(job, 1, CPU_NODE, requests={"cpu": "1000", "memory": "1Gi"})
    await backend.create_pods([oom, too_big])

    def reasons() -> dict[str, tuple[str, str]] | None:
        got: dict[str, tuple[str, str]] = {
            p.name: (p.phase, p.reason) for p in pods_of(backend, job)
        }
        want = {oom.name: ("Failed", "OOMKilled"), too_big.name: ("Pending", "Unschedulable")}
        return got if got == want else None

    await eventually(reasons, "OOMKilled and Unschedulable")
    unschedulable = next(p for p in pods_of(backend, job) if p.name == too_big.name)
    assert "Insufficient cpu" in unschedulable.message
    await backend.delete_pods([oom.name, too_big.name], 0)


async def test_deleting_the_owner_deletes_the_pods(
    backend: KubernetesBackend, cluster: ClusterState
) -> None:
    job = job_id()
    await backend.create_pods([spec(job, r, CPU_NODE) for r in range(2)])
    await eventually(
        lambda: [p.phase for p in pods_of(backend, job)] == ["Running", "Running"], "Running"
    )
    async with cluster.client() as client:
        await client.delete(f"/api/v1/namespaces/{NS}/configmaps/suanpan-{job}-e1")
    await eventually(lambda: not pods_of(backend, job), "pods garbage-collected")
    selector = f"labelSelector={ann.JOB_LABEL}={job}"
    assert await listed(cluster, f"/api/v1/namespaces/{NS}/pods?{selector}") == []


async def test_delete_pods_also_removes_the_emptied_owner(
    backend: KubernetesBackend, cluster: ClusterState
) -> None:
    job = job_id()
    specs = [spec(job, r, CPU_NODE) for r in range(2)]
    await backend.create_pods(specs)
    await backend.delete_pods([specs[0].name, "no-such-pod"], 30)
    await eventually(lambda: [p.name for p in pods_of(backend, job)] == [specs[1].name], "one left")
    owner = f"/api/v1/namespaces/{NS}/configmaps/suanpan-{job}-e1"
    async with cluster.client() as client:
        await client.get(owner)  # still owns the other pod
        await backend.delete_pods([specs[1].name], 30)
        await eventually(lambda: not pods_of(backend, job), "pods gone")

        async def owner_gone() -> bool:
            try:
                await client.get(owner)
            except KubeError as exc:
                return exc.status == 404
            return False

        deadline = time.monotonic() + 20
        while not await owner_gone():
            assert time.monotonic() < deadline, "owner ConfigMap not deleted"
            await asyncio.sleep(0.1)


async def test_a_multi_pod_placement_gets_a_headless_service_listing_its_pods(
    backend: KubernetesBackend, cluster: ClusterState
) -> None:
    job = job_id()
    service = f"sp-{job}-e1"
    specs = [
        replace(spec(job, r, CPU_NODE), hostname=f"train-worker-{r}", service=service)
        for r in range(2)
    ]
    await backend.create_pods(specs)
    async with cluster.client() as client:
        svc = await client.get(f"/api/v1/namespaces/{NS}/services/{service}")
        owner = await client.get(f"/api/v1/namespaces/{NS}/configmaps/suanpan-{job}-e1")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"]
    assert svc["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    pods = await listed(
        cluster, f"/api/v1/namespaces/{NS}/pods?labelSelector={ann.JOB_LABEL}={job}"
    )
    assert {(p["spec"]["hostname"], p["spec"]["subdomain"]) for p in pods} == {
        ("train-worker-0", service),
        ("train-worker-1", service),
    }

    async def endpoints() -> set[str] | None:
        path = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"
        slices = await listed(cluster, f"{path}?labelSelector=kubernetes.io/service-name={service}")
        names = {
            e["targetRef"]["name"]
            for s in slices
            for e in s.get("endpoints") or []
            if e.get("targetRef")
        }
        return names if len(names) == 2 else None

    deadline = time.monotonic() + 30
    while (found := await endpoints()) is None:
        assert time.monotonic() < deadline, "the EndpointSlice never listed both pods"
        await asyncio.sleep(0.5)
    assert found == {s.name for s in specs}
    await backend.delete_pods([s.name for s in specs], 0)


# ------------------------------------------------------------------------------------- RBAC

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "agent" / "rbac.yaml"
RBAC_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


def renamed(value: Any, names: Mapping[str, str]) -> Any:
    """The manifest with every string equal to a key of `names` replaced (names only)."""
    if isinstance(value, dict):
        return {k: renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, names) for v in value]
    return names.get(value, value) if isinstance(value, str) else value


def kubeconfig_file(path: Path, server: str, token: str, ca_file: str = "") -> str:
    cluster = {"server": server, **({"certificate-authority": ca_file} if ca_file else {})}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return str(path)


async def test_runs_with_the_rbac_of_the_manifest(cluster: ClusterState, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    workloads, home, account = f"kb-rbac-{suffix}", f"kb-rbac-sys-{suffix}", f"agent-{suffix}"
    names = {"suanpan": workloads, "suanpan-system": home, "suanpan-agent": account}
    objects = [renamed(doc, names) for doc in yaml.safe_load_all(RBAC.read_text())]
    async with cluster.client() as client:
        for obj in objects:
            path = RBAC_PATHS[obj["kind"]].format(ns=obj["metadata"].get("namespace"))
            await client.post(path, obj)
        issued = await client.post(
            f"/api/v1/namespaces/{home}/serviceaccounts/{account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
    config = kubeconfig_file(
        tmp_path / "agent.kubeconfig",
        cluster.apiserver_url,
        issued["status"]["token"],
        cluster.ca_file,
    )
    agent = KubernetesBackend(config, workloads, CATALOG)
    try:
        await agent.start()
        assert node_named(agent, CPU_NODE) is not None
        job = job_id()
        tenant = tenant_namespace(workloads, "t")
        specs = [replace(spec(job, r, CPU_NODE), namespace=tenant) for r in range(2)]
        await asyncio.gather(agent.create_pods(specs), agent.create_pods(specs))  # 409 paths
        await eventually(lambda: len(pods_of(agent, job)) == 2, "pods created by the agent")
        await agent.delete_pods([s.name for s in specs], 0)
        await eventually(lambda: not pods_of(agent, job), "pods deleted by the agent")
    finally:
        await agent.stop()
        async with cluster.client() as client:
            for path in (
                f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{account}",
                f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{account}",
                f"/api/v1/namespaces/{tenant_namespace(workloads, 't')}",
                f"/api/v1/namespaces/{home}",
            ):
                await client.delete(path)


# ------------------------------------------------------------------------------- resync (410)


class ExpiringProxy:
    """A plain-HTTP pass-through to one apiserver that can make the pods watch expire.

    `freeze()`: the pods watches open now stop delivering events (the client falls behind).
    `expire()`: the next pods watch is answered like a too-old resourceVersion: an ERROR
    event with a 410 Expired status.
    """

    GONE = {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": "too old resource version: 1 (1000)",
            "reason": "Expired",
            "code": 410,
        },
    }

    def __init__(self, cs: ClusterState) -> None:
        self.cs = cs
        self.url = ""
        self._generation = 0
        self._expire = False
        self._ssl = ssl_context(cs.ca_file)
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=1
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def freeze(self) -> None:
        self._generation += 1

    def expire(self) -> None:
        self._expire = True

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        pods_watch = request.path == "/api/v1/pods" and request.query.get("watch", "").lower() in (
            "true",
            "1",
        )
        resp = web.StreamResponse()
        if pods_watch and self._expire:
            self._expire = False
            resp.content_type = "application/json"
            await resp.prepare(request)
            await resp.write(json.dumps(self.GONE).encode() + b"\n")
            await resp.write_eof()
            return resp
        generation = self._generation
        headers = {
            k: v
            for k, v in request.headers.items()
            if k in ("Authorization", "Content-Type", "Accept")
        }
        async with self._session.request(
            request.method,
            self.cs.apiserver_url + request.rel_url.path_qs,
            headers=headers,
            data=await request.read(),
            ssl=self._ssl,
        ) as upstream:
            resp.set_status(upstream.status)
            resp.content_type = upstream.content_type
            await resp.prepare(request)
            async for chunk in upstream.content.iter_any():
                if not (pods_watch and generation != self._generation):
                    await resp.write(chunk)
            await resp.write_eof()
        return resp


async def test_resync_after_410_keeps_the_cache_right(
    backend: KubernetesBackend, cluster: ClusterState, tmp_path: Path
) -> None:
    proxy = ExpiringProxy(cluster)
    await proxy.start()
    kubeconfig = kubeconfig_file(tmp_path / "proxied.kubeconfig", proxy.url, cluster.token)
    proxied = KubernetesBackend(kubeconfig, PREFIX, CATALOG)
    await proxied.start()
    job = job_id()
    stays, goes, comes, later = (spec(job, r, CPU_NODE) for r in range(4))
    try:
        await backend.create_pods([stays, goes])
        await eventually(
            lambda: names_of(proxied, job) == [stays.name, goes.name], "proxied backend sees pods"
        )

        proxy.freeze()  # from now on the proxied backend misses these changes
        await backend.create_pods([comes])
        await backend.delete_pods([goes.name], 0)
        await eventually(lambda: names_of(backend, job) == [stays.name, comes.name], "changes made")
        await asyncio.sleep(1)
        assert names_of(proxied, job) == [stays.name, goes.name]  # stale: the events were lost

        proxy.expire()
        proxied.watches["pods"].restart()  # resumes from its (now "too old") version: 410
        await eventually(lambda: proxied.watches["pods"].resyncs == 1, "resync after 410")
        await eventually(
            lambda: names_of(proxied, job) == [stays.name, comes.name], "cache right after resync"
        )
        resyncs = proxied.metrics.registry.get_sample_value(
            "suanpan_agent_kube_resyncs_total", {"resource": "pods"}
        )
        assert resyncs == 1

        await backend.create_pods([later])  # and the watch goes on after the resync
        await eventually(lambda: later.name in names_of(proxied, job), "watch resumed after resync")
    finally:
        await proxied.stop()
        await proxy.stop()
        await backend.delete_pods([s.name for s in (stays, comes, later)], 0)


def names_of(b: KubernetesBackend, job: str) -> list[str]:
    return sorted(p.name for p in pods_of(b, job))
