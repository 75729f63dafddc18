"""A hub (`suanpan-hub serve` on its own PostgreSQL) and the real agents of some of the
session's local clusters, for end-to-end tests that submit through the API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.failover import Agents, Api, Hubs, clear_pods, hub_database, setup_tenancy
from deploy.local.clusters import Environment
from deploy.local.kube import wait_for
from federation.store.embedded import EmbeddedPostgres

ASCEND = "huawei/Ascend910B3"


def ascend_job(
    name: str,
    count: int,
    priority: str = "normal",
    spec: Mapping[str, Any] | None = None,
    **task: Any,
) -> dict[str, Any]:
    """A job of the bench tenant: one task whose replicas take `count` Ascend 910B3 each
    (`spec`: more of the job's spec, `task`: more of its task)."""
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": name, "tenant": "bench"},
        "spec": {
            "queue": "default",
            "priorityClass": priority,
            **(spec or {}),
            "tasks": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {
                        "cpu": "1",
                        "memory": "1Gi",
                        "accelerators": {"count": count, "anyOf": [{"flavor": ASCEND}]},
                    },
                    **task,
                }
            ],
        },
    }


@asynccontextmanager
async def hub_over(
    env: Environment, names: Sequence[str], workdir: Path, scheduling: str = ""
) -> AsyncIterator[Api]:
    """Admin calls to a hub whose agents run for `names` (Ready when this yields);
    `scheduling`: more of the configuration's `scheduling` section (one flow mapping's
    entries). The session's clusters are left without pods."""
    pg = EmbeddedPostgres(workdir / "pg")
    url = await hub_database(pg)
    extra = f", {scheduling}" if scheduling else ""
    (workdir / "hub.yaml").write_text(f"scheduling: {{intervalSeconds: 0.2{extra}}}\n")
    hubs = Hubs(url, workdir, count=1, args=["--config", str(workdir / "hub.yaml")])
    agents: Agents | None = None
    try:
        await hubs.start(hubs.ports[0])
        api = Api(hubs)
        tokens = await setup_tenancy(api, list(names))
        kubeconfigs = {name: env.cluster(name).kubeconfig for name in names}
        agents = Agents(dict.fromkeys(names, hubs.urls), tokens, workdir, kubeconfigs)
        for name in names:
            await agents.start(name)

        async def ready() -> bool:
            for name in names:
                cluster = await api.call("GET", f"/v1/clusters/{name}") or {}
                if cluster.get("state") != "Ready":
                    return False
            return True

        await wait_for(f"{', '.join(names)} Ready", ready, 90)
        yield api
    finally:
        if agents is not None:
            await agents.close()
        await hubs.close()
        await pg.stop()
        for cs in env.clusters:  # the session's other modules use these clusters
            await clear_pods(cs)
