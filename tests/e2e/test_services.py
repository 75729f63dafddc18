"""A service across two real local clusters, end to end (issue 15 part 2's "done when").

Two clusters (kube-apiserver, kube-controller-manager, kube-scheduler calling
`suanpan-extender`, kwok), the real agent of each over `KubernetesBackend`, and the real
`suanpan-hub serve` on its own PostgreSQL. The service's pods are pinned to a kwok node per
cluster whose `spec.podCIDR` is a loopback range (`ClusterState.loopback_pod_cidr`), so this
test serves each pod's metrics page on the pod's own address and controls the load: the
replicas spread over both clusters, their endpoints are listed, the metric scales them out and
back in, and a new image rolls them over without losing a ready replica.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from bench.failover import Api
from deploy.load_ramp import Load
from deploy.local.clusters import Environment
from deploy.local.kube import JSON, wait_for
from deploy.local.processes import free_ports
from federation.wire import annotations as ann
from tests.e2e.conftest import ExtendedClusters
from tests.e2e.hub import hub_over
from tests.e2e.test_extender import node_manifest

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

CLUSTERS = ("dc-beijing", "dc-shanghai")
NODE = "e2e-serving"
METRIC_PORT = free_ports(1)[0]
SERVING_LABEL = "e2e-serving"


def manifest(image: str) -> dict[str, Any]:
    """Service `chat`: 2 to 6 replicas over both clusters, scaled by `inflight` (target 4)."""
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Service",
        "metadata": {"name": "chat", "tenant": "bench"},
        "spec": {
            "queue": "default",
            "spread": {"clusters": 2},
            "ports": [{"name": "http", "port": 8080}],
            "autoscaling": {
                "metric": {"name": "inflight", "target": 4, "port": METRIC_PORT},
                "scaleDownStabilizationSeconds": 5,
            },
            "server": {
                "minReplicas": 2,
                "maxReplicas": 6,
                "resources": {"cpu": "1", "memory": "1Gi"},
                "template": {
                    "spec": {
                        "nodeSelector": {SERVING_LABEL: "true"},
                        "containers": [
                            {
                                "name": "server",
                                "image": image,
                                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                            }
                        ],
                    }
                },
            },
        },
    }


async def pods(env: Environment) -> dict[str, list[JSON]]:
    """The service's live pods per cluster."""
    out: dict[str, list[JSON]] = {}
    for name in CLUSTERS:
        async with env.cluster(name).client() as client:
            listed = await client.get(f"/api/v1/pods?labelSelector={ann.GENERATION_LABEL}")
        out[name] = [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]
    return out


def ready(pod: JSON) -> bool:
    conditions = pod["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(
    extended_clusters: ExtendedClusters, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Api]:
    """A hub and both agents, each cluster with a serving node whose pods get loopback IPs."""
    env = extended_clusters.env
    for cs in env.clusters:
        node = node_manifest(cs.name, NODE, {}, **{SERVING_LABEL: "true"})
        node["spec"]["podCIDR"] = cs.loopback_pod_cidr(9)
        async with cs.client() as client:
            await client.post("/api/v1/nodes", node)
    try:
        async with hub_over(env, CLUSTERS, tmp_path_factory.mktemp("services")) as calls:
            yield calls
    finally:
        for cs in env.clusters:
            async with cs.client() as client:
                await client.delete(f"/api/v1/nodes/{NODE}")


async def endpoints(api: Api, service: str) -> list[dict[str, Any]]:
    found = await api.call("GET", f"/v1/services/{service}/endpoints") or {}
    return list(found.get("items", []))


async def watching(
    env: Environment, load: Load, seen: list[int], check: Callable[[], Awaitable[bool]]
) -> bool:
    """Serve the metric on the pods there are now, note the ready count, then `check`."""
    now = await pods(env)
    every = [p for listed in now.values() for p in listed]
    await load.serve({p["status"]["podIP"] for p in every if p["status"].get("podIP")})
    seen.append(sum(map(ready, every)))
    return await check()


async def test_a_service_spreads_scales_out_and_in_and_rolls_over(
    api: Api, extended_clusters: ExtendedClusters
) -> None:
    env = extended_clusters.env
    load = Load("inflight", METRIC_PORT)
    seen: list[int] = []

    async def until(what: str, check: Callable[[], Awaitable[bool]]) -> None:
        await wait_for(what, lambda: watching(env, load, seen, check), 120)

    try:
        created = await api.call("POST", "/v1/services", json=manifest("chat:1"))
        service = created["id"]

        async def spread() -> bool:
            found = await endpoints(api, service)
            return sorted(e["cluster"] for e in found if e["ready"] >= 1) == sorted(CLUSTERS)

        await wait_for(
            "one ready replica in each cluster", lambda: watching(env, load, seen, spread), 120
        )
        for e in await endpoints(api, service):
            assert e["address"].startswith("chat.") and e["clusterIP"], e
            assert [p["port"] for p in e["ports"]] == [8080], e

        async def replicas(count: int) -> bool:
            found = await endpoints(api, service)
            listed = await pods(env)
            return (
                sum(e["ready"] for e in found) == count
                and sum(len(p) for p in listed.values()) == count
                and all(listed[c] for c in CLUSTERS)
            )

        load.total = 32.0  # 8 per replica on 4 replicas: 8 wanted, at most 6
        await wait_for(
            "scaled out to 6", lambda: watching(env, load, seen, lambda: replicas(6)), 120
        )
        scaled = await api.call("GET", f"/v1/services/{service}")
        assert scaled["desired"] == 6, scaled

        load.total = 2.0  # 1 per replica: 1 wanted, at least 2
        await wait_for(
            "scaled in to 2", lambda: watching(env, load, seen, lambda: replicas(2)), 120
        )

        seen.clear()
        await api.call("PUT", f"/v1/services/{service}", json=manifest("chat:2"))

        async def rolled() -> bool:
            found = await endpoints(api, service)
            listed = [p for ps in (await pods(env)).values() for p in ps]
            images = {p["spec"]["containers"][0]["image"] for p in listed}
            return images == {"chat:2"} and all(
                e["generation"] == 2 and e["updated"] == e["ready"] >= 1 for e in found
            )

        await until("rolled over to chat:2", rolled)
        assert min(seen) >= 2, seen  # never below the ready count it had

        await api.call("DELETE", f"/v1/services/{service}")

        async def gone() -> bool:
            return not any((await pods(env)).values())

        await wait_for("pods gone", gone, 60)
    finally:
        await load.close()
