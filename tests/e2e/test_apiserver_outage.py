"""A member cluster's kube-apiserver stopped and started again, on a real local cluster: the
agent (real hub, real Kubernetes backend) says so in its lease and the hub stops sending it
work; an agent started meanwhile retries instead of exiting; the extender's /readyz fails
while its watches are broken; everything recovers by itself once the apiserver is back."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from kubernetes_asyncio import client as kube_client
from kubernetes_asyncio import config as kube_config

from cluster_agents.backends.kubernetes import KubernetesBackend
from cluster_agents.extender.cache import Cache
from cluster_agents.extender.kube import KubePods, keep_synced, reflectors
from cluster_agents.extender.server import make_app
from cluster_agents.extender.service import Extender
from cluster_agents.kube.metrics import BackendMetrics
from deploy.fleet import Fleet
from deploy.local.clusters import Environment, start_component, stop_component
from deploy.local.kube import wait_for
from deploy.local.pki import write_serving_pki
from federation.catalog import load_catalog
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database

pytestmark = pytest.mark.e2e

ADMIN = "sp_e2e_outage_admin"
CATALOG = load_catalog()


@pytest.fixture
async def fleet(db: Database, tmp_path: Path) -> AsyncIterator[Fleet]:
    await ensure_admin_token(db, ADMIN)
    f = Fleet(db, ADMIN, pki=write_serving_pki(tmp_path / "pki"))  # agents over mTLS
    await f.start_hub()
    f.start_loop()
    yield f
    await f.close()


async def state(fleet: Fleet, name: str) -> dict[str, Any]:
    return dict(await fleet.call("GET", f"/v1/clusters/{name}"))


async def test_an_apiserver_outage_is_reported_and_survived(
    fleet: Fleet, k8s_clusters: Environment
) -> None:
    cs = k8s_clusters.clusters[0]
    namespace = f"outage-{uuid.uuid4().hex[:6]}"
    await fleet.attach("real", KubernetesBackend(cs.kubeconfig, namespace, CATALOG))
    api = await kube_config.new_client_from_config(config_file=cs.kubeconfig)
    metrics = BackendMetrics(None)
    cache = Cache(CATALOG)
    watches = reflectors(kube_client.CoreV1Api(api), cache, metrics)
    extender = Extender(cache, KubePods(kube_client.CoreV1Api(api), metrics), watches=watches)
    watching = asyncio.create_task(keep_synced(watches))
    readyz: TestClient[Any, Any] = TestClient(TestServer(make_app(extender), host="127.0.0.1"))
    await readyz.start_server()
    try:

        async def ready() -> bool:
            c = await state(fleet, "real")
            extender_ok = (await readyz.get("/readyz")).status == 200
            return bool(c["state"] == "Ready" and c["apiserverProblem"] is None and extender_ok)

        await wait_for("cluster Ready, extender ready", ready, 60)
        await stop_component(cs, "kube-apiserver")
        stopped = time.monotonic()

        async def reported() -> bool:
            c = await state(fleet, "real")
            return c["state"] == "NotReady" and bool(c["apiserverProblem"])

        await wait_for("the hub told the apiserver is unreachable", reported, 15)
        detected = time.monotonic() - stopped
        assert detected < 10, detected
        assert (await readyz.get("/readyz")).status == 503
        await fleet.stop_agent("real")  # an agent (re)started during the outage
        fleet.clusters["real"] = KubernetesBackend(cs.kubeconfig, namespace, CATALOG)
        fleet.start_agent("real")

        async def retrying() -> bool:
            return "cannot start" in ((await state(fleet, "real"))["apiserverProblem"] or "")

        await wait_for("the new agent retrying and saying why", retrying, 15)
        assert not fleet.agents["real"][2].done()
        await start_component(k8s_clusters, cs, "kube-apiserver")
        await wait_for("everything back by itself", ready, 90)
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await readyz.close()
        await api.close()
