"""Pods per second of the real kube-scheduler with and without the Suanpan extender, at 200
and at 1,000 nodes.

One local cluster (deploy/local) with kwok nodes of 8 Ascend 910B3 each (200, then 800 more),
and `suanpan-extender` running against it. For each measurement, 500 pods asking for 1, 2 or
4 NPUs are created for a scheduler name nobody serves yet; then a kube-scheduler is started
with deploy/scheduler's generated configuration for that name, with the extender ("with") or
with the `extenders` entry removed ("without"). The rate is measured between the first and the
last binding seen on a watch, so pod creation and the scheduler's start-up do not count. The
two configurations are interleaved (without, with, with, without) on the same nodes, each
run's pods deleted before the next, and each figure is the mean of its two runs, so that a
change in the machine's load during the study weighs on both alike; kube-scheduler's client
limit is raised to 1,000 requests/s in both, so that its default 50/s does not cap the run
that binds itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from bench.results import Figure, write_figure
from cluster_agents.extender import scheduler_config
from deploy.local.binaries import ensure_binaries
from deploy.local.clusters import ClusterState, down, unready_nodes, up
from deploy.local.kube import KubeClient, KubeError, ssl_context, wait_for
from deploy.local.processes import free_ports
from federation.catalog import load_catalog
from tests.e2e.test_extender import (
    ExtenderProcess,
    node_manifest,
    pod_manifest,
    start_kube_scheduler,
)

NODE_COUNTS = (200, 1000)
PODS = 500
ORDER = (False, True, True, False)  # with the extender?
SHAPES = (1, 2, 4, 1, 2)
RESOURCE = "huawei.com/Ascend910B3"


def _client(cs: ClusterState) -> KubeClient:
    """An admin client with room for bulk calls on a busy apiserver (deleting 500 pods)."""
    return KubeClient(cs.apiserver_url, cs.token, cs.ca_file, timeout_s=120)


async def _add_nodes(kc: KubeClient, cluster: str, start: int, stop: int) -> None:
    """Nodes `bench-<start>` to `bench-<stop - 1>`, Ready."""
    sem = asyncio.Semaphore(16)

    async def one(i: int) -> None:
        async with sem:
            await kc.post("/api/v1/nodes", node_manifest(cluster, f"bench-{i:04d}", {RESOURCE: 8}))

    await asyncio.gather(*(one(i) for i in range(start, stop)))
    names = [f"bench-{i:04d}" for i in range(start, stop)]

    async def ready() -> bool:
        return not await unready_nodes(kc, names)

    await wait_for(f"{stop - start} nodes of {cluster} Ready", ready, 300, interval_s=1)


async def _namespace(kc: KubeClient) -> str:
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    await kc.post("/api/v1/namespaces", {"metadata": {"name": ns}})

    async def default_sa() -> bool:
        try:
            await kc.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default")
        except KubeError:
            return False
        return True

    await wait_for("default ServiceAccount", default_sa, 30)
    return ns


async def _watch_bindings(cs: ClusterState, ns: str, bound: dict[str, float]) -> None:
    """Record when each pod of `ns` is first seen with a node, until cancelled.

    The apiserver drops a watcher that falls behind a burst, so the watch resumes from the
    last version it saw.
    """
    url = f"{cs.apiserver_url}/api/v1/namespaces/{ns}/pods?watch=true"
    headers = {"Authorization": f"Bearer {cs.token}"}
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    version = ""
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        while True:
            since = f"&resourceVersion={version}" if version else ""
            async with session.get(url + since, ssl=ssl_context(cs.ca_file)) as resp:
                buffer = b""
                async for chunk in resp.content.iter_any():
                    *lines, buffer = (buffer + chunk).split(b"\n")
                    for line in lines:
                        pod: dict[str, Any] = json.loads(line)["object"]
                        version = pod["metadata"].get("resourceVersion", version)
                        name = pod["metadata"]["name"]
                        if pod.get("spec", {}).get("nodeName") and name not in bound:
                            bound[name] = time.perf_counter()


async def _measure(
    cs: ClusterState, bin_dir: Path, config: dict[str, Any], name: str, workdir: Path
) -> dict[str, float]:
    """Schedule PODS pending pods with a fresh kube-scheduler; the rate of its bindings."""
    async with _client(cs) as kc:
        ns = await _namespace(kc)
        sem = asyncio.Semaphore(16)

        async def create(i: int) -> None:
            pod = pod_manifest(f"p-{i:03d}", SHAPES[i % len(SHAPES)])
            pod["spec"]["schedulerName"] = name
            async with sem:
                await kc.post(f"/api/v1/namespaces/{ns}/pods", pod)

        await asyncio.gather(*(create(i) for i in range(PODS)))
        bound: dict[str, float] = {}
        watch = asyncio.create_task(_watch_bindings(cs, ns, bound))
        config = {
            **config,
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": name}],
            "clientConnection": {"qps": 1000, "burst": 1000},
        }
        scheduler = await asyncio.to_thread(
            start_kube_scheduler, bin_dir, config, cs.kubeconfig, workdir
        )

        async def all_bound() -> bool:
            return len(bound) == PODS

        try:
            await wait_for(f"{PODS} pods bound", all_bound, 300, explain=lambda: str(len(bound)))
        finally:
            watch.cancel()
            scheduler.terminate()
            await asyncio.to_thread(scheduler.wait, 10)
        first, last = min(bound.values()), max(bound.values())

        asked = False

        async def gone() -> bool:
            nonlocal asked
            try:  # a loaded apiserver may time out (504) while it deletes: ask again
                if not asked:
                    await kc.request("DELETE", f"/api/v1/namespaces/{ns}/pods?gracePeriodSeconds=0")
                    asked = True
            except KubeError as exc:
                if exc.status != 504:
                    raise
            return not (await kc.get(f"/api/v1/namespaces/{ns}/pods?limit=1"))["items"]

        await wait_for("pods deleted", gone, 300, interval_s=1)
        return {"pods_per_s": (PODS - 1) / (last - first), "seconds": last - first}


async def _study(node_counts: tuple[int, ...]) -> list[Figure]:
    bin_dir = await asyncio.to_thread(ensure_binaries)
    port = free_ports(1)[0]
    env = await up(1, extender_url=f"http://127.0.0.1:{port}", bin_dir=bin_dir)
    cs = env.clusters[0]
    extender = ExtenderProcess.start(cs.kubeconfig, port, env.workdir / "extender.log")
    figures: list[Figure] = []
    try:
        await extender.wait_ready()
        config = scheduler_config(load_catalog(), url=extender.url)
        plain = {k: v for k, v in config.items() if k != "extenders"}
        added = 0
        for nodes in node_counts:
            async with _client(cs) as kc:
                await _add_nodes(kc, cs.name, added, nodes)
            added = nodes
            runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
            for i, with_extender in enumerate(ORDER):
                name = f"bench-{nodes}-{i}-{'with' if with_extender else 'without'}"
                runs[with_extender].append(
                    await _measure(
                        cs,
                        bin_dir,
                        config if with_extender else plain,
                        name,
                        env.workdir / name,
                    )
                )
            figures += _figures(nodes, runs, await extender.metrics())
    finally:
        extender.stop()
        await down(env.workdir)
    return figures


def _figures(
    nodes: int, runs: dict[bool, list[dict[str, float]]], metrics: dict[str, float]
) -> list[Figure]:
    """The pair of rates at `nodes` nodes and their ratio (extender figures: cumulative)."""

    def mean_ms(verb: str) -> float:
        total = metrics[f"suanpan_extender_call_seconds_sum{{verb={verb}}}"]
        return round(
            1000 * total / metrics[f"suanpan_extender_call_seconds_count{{verb={verb}}}"], 2
        )

    rate = {mode: statistics.mean(r["pods_per_s"] for r in found) for mode, found in runs.items()}
    params = {
        "nodes": nodes,
        "pods": PODS,
        "npus_per_pod": list(SHAPES),
        "pods_per_s_each_run": {
            ("with" if mode else "without"): [round(r["pods_per_s"], 1) for r in found]
            for mode, found in runs.items()
        },
        "extender_mean_ms_so_far": {v: mean_ms(v) for v in ("filter", "prioritize", "bind")},
        "bind_conflicts_so_far": metrics.get("suanpan_extender_bind_conflicts_total{}", 0.0),
        "client_qps": 1000,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "kubernetes": "v1.36.2",
    }
    print(f"{nodes} nodes: {params}")
    return [
        Figure(
            f"kube_scheduler_pods_per_s_with_extender_{nodes}_nodes",
            round(rate[True], 1),
            "pods/s",
            True,
            params,
        ),
        Figure(
            f"kube_scheduler_pods_per_s_without_extender_{nodes}_nodes",
            round(rate[False], 1),
            "pods/s",
            True,
            params,
        ),
        Figure(
            f"kube_scheduler_extender_ratio_{nodes}_nodes",
            round(rate[True] / rate[False], 3),
            "with / without",
            True,
            params,
        ),
    ]


def run(node_counts: tuple[int, ...] = NODE_COUNTS) -> list[Figure]:
    """kube-scheduler throughput with and without the extender, side by side."""
    return asyncio.run(_study(node_counts))


if __name__ == "__main__":
    counts = tuple(int(a) for a in sys.argv[1:]) or NODE_COUNTS
    for figure in run(counts):
        write_figure(figure)
        print(f"{figure.name}: {figure.value} {figure.unit} {figure.params}")
