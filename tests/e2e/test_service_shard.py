"""A service's shard on a real local cluster: the agent's own code (`Agent.reconcile`,
`KubernetesBackend`, the metric reader) over kube-apiserver, kube-scheduler calling
`suanpan-extender`, and kwok; only the hub is replaced by a recorder of the reports.

The shard's pods are pinned to a kwok node whose `spec.podCIDR` is a loopback range of the
cluster's (`ClusterState.loopback_pod_cidr`), so the test serves each pod's metrics page on the
pod's own address.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from cluster_agents.agent.metric_reader import MetricReader
from deploy.local.clusters import ClusterState
from deploy.local.kube import JSON, KubeClient, KubeError
from deploy.local.processes import free_ports
from federation.k8s_names import tenant_namespace
from federation.wire import annotations as wire
from federation.wire.agent import Assignment, ServingStatus
from tests.compiled_jobs import service_assignment
from tests.e2e.conftest import K8sEnvFactory, fresh_namespace
from tests.e2e.test_extender import Stack, node_manifest, start_stack
from tests.e2e.test_incluster import CATALOG, RunningAgent

pytestmark = pytest.mark.e2e

NODE = "e2e-serving"
METRIC_PORT = free_ports(1)[0]


def loopback_node(cs: ClusterState) -> JSON:
    """A CPU node whose pods get loopback addresses."""
    node = node_manifest(cs.name, NODE, {})
    node["spec"]["podCIDR"] = cs.loopback_pod_cidr(7)
    return node


@pytest.fixture(scope="module")
def stack(
    k8s_env_factory: K8sEnvFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from start_stack(k8s_env_factory, tmp_path_factory.mktemp("ext"), loopback_node)


@pytest.fixture
async def ns(kc: KubeClient) -> AsyncIterator[str]:
    async for name in fresh_namespace(kc, tenant_namespace(f"e2e-{uuid.uuid4().hex[:8]}", "t")):
        yield name


def shard(job: uuid.UUID, generation: int) -> Assignment:
    """Service "web" held at 2 replicas on our node, its metric `inflight` on METRIC_PORT."""
    server: dict[str, Any] = {
        "minReplicas": 1,
        "maxReplicas": 4,
        "resources": {"cpu": "1", "memory": "1Gi"},
        "template": {
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": NODE},
                "containers": [
                    {
                        "name": "server",
                        "image": f"web:{generation}",
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                    }
                ],
            }
        },
    }
    scaling = {"metric": {"name": "inflight", "target": 4, "port": METRIC_PORT}}
    return service_assignment(
        CATALOG, server, held=2, generation=generation, job=job, autoscaling=scaling
    )


async def serve_metric(ips: list[str]) -> list[web.AppRunner]:
    """A page with `inflight{path="a"} 1` and `inflight{path="b"} 2` on each address."""

    async def page(_: web.Request) -> web.Response:
        return web.Response(text='inflight{path="a"} 1\ninflight{path="b"} 2\n')

    app = web.Application()
    app.router.add_get("/metrics", page)
    runners = []
    for ip in ips:
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, ip, METRIC_PORT).start()
        runners.append(runner)
    return runners


def serving(ran: RunningAgent) -> ServingStatus | None:
    """The serving status the agent last reported."""
    with_serving = [u.serving for u in ran.hub.updates if u.serving is not None]
    return with_serving[-1] if with_serving else None


async def test_a_shard_serves_reads_its_metric_rolls_over_and_goes(
    stack: Stack, kc: KubeClient, ns: str
) -> None:
    job = uuid.uuid4()
    ran = await RunningAgent.start(stack.cluster, ns, shard(job, 1))
    pods: list[JSON] = []
    runners: list[web.AppRunner] = []

    async def listed() -> list[JSON]:
        got = await kc.get(f"/api/v1/namespaces/{ns}/pods")
        return [p for p in got["items"] if not p["metadata"].get("deletionTimestamp")]

    def ready(pod: JSON) -> bool:
        conds = pod["status"].get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1)) as session:
            reader: MetricReader = ran.agent.metrics_reader

            async def serving_two() -> bool:
                pods[:] = await listed()
                said = serving(ran)
                return len(pods) == 2 and said is not None and said.ready == 2

            await ran.drive("2 ready replicas reported", serving_two)
            service = await kc.get(f"/api/v1/namespaces/{ns}/services/web")
            assert service["spec"]["selector"] == {wire.JOB_LABEL: str(job), wire.EPOCH_LABEL: "1"}
            assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
                (8080, 8080)
            ]
            said = serving(ran)
            assert said is not None and said.cluster_ip == service["spec"]["clusterIP"] != ""
            assert said.address == f"web.{ns}.svc.cluster.local"
            assert (said.updated, said.generation) == (2, 1)
            for pod in pods:
                assert pod["spec"]["restartPolicy"] == "Always"
                assert pod["metadata"]["labels"][wire.GENERATION_LABEL] == "1"
                assert pod["status"]["podIP"].startswith("127.")
            runners = await serve_metric([p["status"]["podIP"] for p in pods])

            async def metric_read() -> bool:
                await reader.read(session)
                said = serving(ran)
                return said is not None and (said.metric_sum, said.sampled) == (6, 2)

            await ran.drive("the metric of both pods reported", metric_read)

            ran.agent.active[str(job)] = shard(job, 2)
            counts: list[tuple[int, int]] = []

            async def rolled() -> bool:
                now = await listed()
                counts.append((sum(map(ready, now)), len(now)))
                gens = sorted(p["metadata"]["labels"][wire.GENERATION_LABEL] for p in now)
                return gens == ["2", "2"] and all(map(ready, now))

            before = len(ran.hub.updates)
            await ran.drive("rolled over to generation 2", rolled)
            assert all(ready >= 2 and count <= 3 for ready, count in counts), counts
            assert any(count == 3 for _, count in counts), counts  # one surge pod at a time
            during = [u.serving for u in ran.hub.updates[before:] if u.serving is not None]
            assert all(s.ready >= 2 for s in during), during
            await ran.drive("generation 2 reported", lambda: _updated(ran))

            del ran.agent.active[str(job)]
            ran.agent.released[str(job)] = 1

            async def gone() -> bool:
                try:
                    await kc.get(f"/api/v1/namespaces/{ns}/services/web")
                except KubeError as exc:
                    return exc.status == 404 and not await listed()
                return False

            await ran.drive("Service and pods gone", gone)
    finally:
        for runner in runners:
            await runner.cleanup()
        await ran.stop()


async def _updated(ran: RunningAgent) -> bool:
    said = serving(ran)
    return said is not None and (said.ready, said.updated, said.generation) == (2, 2, 2)
