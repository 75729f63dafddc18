"""Failover end to end on two real local clusters (issue 11's "done when").

Each cluster is a real kube-apiserver, kube-scheduler calling `suanpan-extender`,
kube-controller-manager and kwok nodes; each runs the real `suanpan-agent` process over its
apiserver, reaching the hub through a loopback proxy the test controls (`deploy.netproxy`); the
hub is a real `suanpan-hub serve` process on its own PostgreSQL. What runs where is read from
the apiservers, not from the hub. Measured times are printed; the guarantees are asserted:
a lost cluster known within 10 s, a fast job running elsewhere within 30 s, an exclusive job
never running in two clusters at once, a returning cluster fenced, a hub restart killing
nobody's work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
import pytest_asyncio

from bench.failover import Agents, Api, Hubs, clear_pods, hub_database, setup_tenancy
from deploy.local.clusters import Environment, start_component, stop_component
from deploy.local.kube import wait_for
from deploy.netproxy import Proxy
from federation.store.embedded import EmbeddedPostgres
from federation.wire import annotations as ann
from tests.e2e.conftest import ExtendedClusters

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

BEIJING, SHANGHAI = "dc-beijing", "dc-shanghai"
FLAVOR, COUNT = "huawei/Ascend910B3", 2  # both clusters have them
LEASE_S, MARGIN_S = 8.0, 2.0  # the default lease; kwok removes deleted pods at once
CONFIG = f"scheduling: {{intervalSeconds: 0.2}}\nfailover: {{exclusiveMarginSeconds: {MARGIN_S}}}\n"


@dataclass
class Stack:
    """The real processes: clusters, one hub, an agent per cluster behind its proxy."""

    env: Environment
    hubs: Hubs
    api: Api
    agents: Agents
    proxies: dict[str, Proxy] = field(default_factory=dict)

    async def pods(self, cluster: str, job_id: str) -> list[dict[str, Any]]:
        """The job's pods in `cluster` that run: phase Running and not being deleted."""
        async with self.env.cluster(cluster).client() as client:
            listed = await client.get(f"/api/v1/pods?labelSelector={ann.JOB_LABEL}%3D{job_id}")
        return [
            p
            for p in listed["items"]
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]

    async def cluster_state(self, name: str) -> str:
        return str((await self.api.call("GET", f"/v1/clusters/{name}") or {}).get("state"))

    async def job(self, job_id: str) -> dict[str, Any]:
        return await self.api.job(job_id)


def epochs(pods: list[dict[str, Any]]) -> set[int]:
    return {int(p["metadata"]["labels"][ann.EPOCH_LABEL]) for p in pods}


async def elapsed_until(what: str, check: Callable[[], Awaitable[bool]], timeout_s: float) -> float:
    start = time.monotonic()
    await wait_for(what, check, timeout_s)
    return time.monotonic() - start


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    extended_clusters: ExtendedClusters, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    env = extended_clusters.env
    workdir = tmp_path_factory.mktemp("failover")
    pg = EmbeddedPostgres(workdir / "pg")
    url = await hub_database(pg)
    (workdir / "hub.yaml").write_text(CONFIG)
    hubs = Hubs(url, workdir, count=1, args=["--config", str(workdir / "hub.yaml")])
    names = [cs.name for cs in env.clusters]
    proxies = {name: Proxy(hubs.ports[0]) for name in names}
    agents: Agents | None = None
    try:
        await hubs.start(hubs.ports[0])
        api = Api(hubs)
        tokens = await setup_tenancy(api, names)
        for proxy in proxies.values():
            await proxy.start()
        urls = {name: [proxies[name].url] for name in names}
        agents = Agents(urls, tokens, workdir, {cs.name: cs.kubeconfig for cs in env.clusters})
        for name in names:
            await agents.start(name)
        stack = Stack(env, hubs, api, agents, proxies)
        await wait_for("both clusters Ready", partial(all_ready, stack), 90)
        yield stack
    finally:
        if agents is not None:
            await agents.close()
        await hubs.close()
        for proxy in proxies.values():
            await proxy.close()
        await pg.stop()
        for cs in env.clusters:  # the session's other modules use these clusters
            await clear_pods(cs)


async def all_ready(stack: Stack) -> bool:
    return all([await stack.cluster_state(c) == "Ready" for c in (BEIJING, SHANGHAI)])


async def running_on(stack: Stack, name: str, cluster: str, failover: str) -> dict[str, Any]:
    """A long job of `failover` running on `cluster` (the other one cordoned meanwhile)."""
    await wait_for("both clusters Ready", partial(all_ready, stack), 60)
    other = SHANGHAI if cluster == BEIJING else BEIJING
    await stack.api.call("POST", f"/v1/clusters/{other}/cordon")
    try:
        job_id = await stack.api.submit(name, failover=failover, flavor=FLAVOR, count=COUNT)

        async def runs() -> bool:
            return bool(await stack.pods(cluster, job_id))

        await wait_for(f"{name}'s pods Running on {cluster}", runs, 60)
    finally:
        await stack.api.call("POST", f"/v1/clusters/{other}/uncordon")
    job = await stack.job(job_id)
    assert job["cluster"] == cluster, job
    return job


async def test_a_hub_killed_and_restarted_kills_nobodys_work(stack: Stack) -> None:
    job = await running_on(stack, "patient", BEIJING, "fast")

    async def hub_says_running() -> bool:
        return bool((await stack.job(job["id"]))["state"] == "Running")

    # the hub has heard `Running` (else the agent's re-sent report, behind its back-off, is
    # what the state after the restart would wait for: a lag, not lost work)
    await wait_for("the hub hearing Running", hub_says_running, 60)
    uids = {p["metadata"]["uid"] for p in await stack.pods(BEIJING, job["id"])}
    port = stack.hubs.ports[0]
    stack.hubs.kill(port)
    await asyncio.sleep(LEASE_S + 2)  # down for longer than the lease
    await stack.hubs.start(port)
    await asyncio.sleep(LEASE_S + 2)  # and a full lease after it came back
    after = await stack.job(job["id"])
    assert (after["state"], after["epoch"], after["cluster"]) == ("Running", job["epoch"], BEIJING)
    assert {p["metadata"]["uid"] for p in await stack.pods(BEIJING, job["id"])} == uids
    assert not await stack.pods(SHANGHAI, job["id"])
    events = await stack.api.call("GET", f"/v1/jobs/{job['id']}/events")
    assert "ClusterLost" not in [e["reason"] for e in events["items"]]
    assert await all_ready(stack)
    await stack.api.cancel(job["id"])


async def test_an_exclusive_job_never_runs_in_two_clusters_across_a_partition(
    stack: Stack,
) -> None:
    job = await running_on(stack, "exclusive", BEIJING, "exclusive")
    both: list[float] = []  # sample times at which both clusters ran its pods
    samples = 0

    async def moved() -> bool:
        nonlocal samples
        samples += 1
        here, there = await stack.pods(BEIJING, job["id"]), await stack.pods(SHANGHAI, job["id"])
        if here and there:
            both.append(time.monotonic())
        return bool(there) and not here

    stack.proxies[BEIJING].cut()  # the agent can no longer renew its lease
    try:
        waited = await elapsed_until("the job running on Shanghai only", moved, 90)
        print(f"exclusive: stopped on Beijing, running on Shanghai {waited:.1f} s after the cut")
        assert not both, f"ran in both clusters at {len(both)} of {samples} samples"
        assert waited >= LEASE_S + MARGIN_S - 1, waited
        for _ in range(20):  # and it stays so
            assert not await stack.pods(BEIJING, job["id"])
            await asyncio.sleep(0.1)
    finally:
        stack.proxies[BEIJING].heal()
    await wait_for("Beijing back", partial(all_ready, stack), 30)
    after = await stack.job(job["id"])
    assert (after["state"], after["cluster"]) == ("Running", SHANGHAI)
    assert epochs(await stack.pods(SHANGHAI, job["id"])) == {after["epoch"]}
    await stack.api.cancel(job["id"])


async def test_a_stopped_apiserver_is_detected_its_fast_job_moves_and_is_fenced_on_return(
    stack: Stack,
) -> None:
    job = await running_on(stack, "apiserver", BEIJING, "fast")
    beijing = stack.env.cluster(BEIJING)
    await stop_component(beijing, "kube-apiserver")
    stopped = time.monotonic()
    try:

        async def not_ready() -> bool:
            return await stack.cluster_state(BEIJING) in ("NotReady", "Offline")

        detected = await elapsed_until("Beijing NotReady", not_ready, 30)

        async def elsewhere() -> bool:
            return bool(await stack.pods(SHANGHAI, job["id"]))

        await wait_for("the fast job Running on Shanghai", elsewhere, 60)
        moved = time.monotonic() - stopped
        print(
            f"apiserver stopped: NotReady after {detected:.1f} s, Running on Shanghai {moved:.1f} s"
        )
        assert detected < 10, detected
        assert moved < 30, moved
        assert await stack.cluster_state(BEIJING) == "Offline"
    finally:
        await start_component(stack.env, beijing, "kube-apiserver")

    async def fenced() -> bool:
        return not await stack.pods(BEIJING, job["id"])

    await wait_for("Beijing's stale pods deleted once it is back", fenced, 60)
    await wait_for("Beijing Ready again", partial(all_ready, stack), 60)
    await stack.api.cancel(job["id"])


async def test_a_killed_agent_is_lost_within_10s_its_fast_job_moves_and_is_fenced(
    stack: Stack,
) -> None:
    job = await running_on(stack, "fast", BEIJING, "fast")
    stack.agents.kill(BEIJING)
    killed = time.monotonic()

    async def offline() -> bool:
        return await stack.cluster_state(BEIJING) == "Offline"

    await wait_for("Beijing Offline", offline, 30)
    detected = time.monotonic() - killed

    async def elsewhere() -> bool:
        return bool(await stack.pods(SHANGHAI, job["id"]))

    await wait_for("the fast job Running on Shanghai", elsewhere, 60)
    moved = time.monotonic() - killed
    print(f"agent killed: Offline after {detected:.1f} s, Running on Shanghai after {moved:.1f} s")
    assert detected < 10, detected
    assert moved < 30, moved
    # at-least-once: nobody stopped the old pods, it runs twice until Beijing's agent is back
    assert epochs(await stack.pods(BEIJING, job["id"])) == {job["epoch"]}
    await stack.agents.start(BEIJING)

    async def fenced() -> bool:
        return not await stack.pods(BEIJING, job["id"])

    await wait_for("Beijing's old-epoch pods deleted by its returning agent", fenced, 60)
    await wait_for("Beijing Ready again", partial(all_ready, stack), 30)
    after = await stack.job(job["id"])
    assert after["epoch"] > job["epoch"] and after["cluster"] == SHANGHAI
    await stack.api.cancel(job["id"])
