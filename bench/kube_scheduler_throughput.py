"""Pods per second of the real kube-scheduler with and without the Suanpan extender, at 200
and at 1,000 nodes.

One local cluster (deploy/local) with kwok nodes of 8 Ascend 910B3 each (200, then 800 more),
and `suanpan-extender` in one of two modes, started for each run and stopped after it (so that
no idle extender's watch weighs on the others): `--filter-keeps best` (the default: filter
answers the one node the pod goes to, so kube-scheduler neither scores nor asks prioritize) or
`--filter-keeps all` (every fitting node, scored by kube-scheduler plus prioritize). For each
measurement, 500 pods asking for 1, 2 or 4 NPUs are created for a scheduler name nobody serves
yet; then a kube-scheduler is started with deploy/scheduler's generated configuration for that
name, pointing at one extender, or with the `extenders` entry removed ("without"). The rate is
measured between the first and the last binding seen on a watch, so pod creation and the
scheduler's start-up do not count. The three configurations are interleaved (without, best,
all, all, best, without) on the same nodes, each run's pods deleted before the next, and each
figure is the mean of its two runs, so that a change in the machine's load during the study
weighs on all alike; kube-scheduler's client limit is raised to 1,000 requests/s in every run,
so that its default 50/s does not cap the run that binds itself.
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

from bench.procs import cpu_seconds
from bench.results import Figure, write_figure
from cluster_agents.extender import scheduler_config
from cluster_agents.extender.service import FILTER_KEEPS, FILTER_KEEPS_ALL, FILTER_KEEPS_BEST
from deploy.local.binaries import ensure_binaries
from deploy.local.clusters import ClusterState, down, unready_nodes, up
from deploy.local.kube import KubeClient, KubeError, ssl_context, wait_for
from deploy.local.processes import free_ports
from federation.catalog import Catalog, load_catalog
from tests.e2e.test_extender import (
    ExtenderProcess,
    node_manifest,
    pod_manifest,
    start_kube_scheduler,
)

NODE_COUNTS = (200, 1000)
PODS = 500
WITHOUT = "without"  # the extender's entry removed from the configuration
# the extender with --filter-keeps best (the default) and all, and without it, interleaved
ORDER = (WITHOUT, FILTER_KEEPS_BEST, FILTER_KEEPS_ALL, FILTER_KEEPS_ALL, FILTER_KEEPS_BEST, WITHOUT)
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
    cs: ClusterState,
    bin_dir: Path,
    config: dict[str, Any],
    name: str,
    workdir: Path,
    extender: ExtenderProcess | None,
) -> dict[str, float]:
    """Schedule PODS pending pods with a fresh kube-scheduler; the rate of its bindings, and the
    CPU time per pod of kube-scheduler and of the extender while they bound them."""
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
        ext_pids = [extender.proc.pid] if extender is not None else []
        ext_cpu = cpu_seconds(ext_pids)
        scheduler = await asyncio.to_thread(
            start_kube_scheduler, bin_dir, config, cs.kubeconfig, workdir
        )

        async def all_bound() -> bool:
            return len(bound) == PODS

        try:
            await wait_for(f"{PODS} pods bound", all_bound, 300, explain=lambda: str(len(bound)))
            sched_cpu = cpu_seconds([scheduler.pid])
            ext_cpu = cpu_seconds(ext_pids) - ext_cpu
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
        result = {
            "pods_per_s": (PODS - 1) / (last - first),
            "seconds": last - first,
            "scheduler_cpu_ms_per_pod": 1000 * sched_cpu / PODS,
        }
        if extender is not None:
            metrics = await extender.metrics()
            result["extender_cpu_ms_per_pod"] = 1000 * ext_cpu / PODS
            for verb in ("filter", "prioritize", "bind"):
                result[f"{verb}_mean_ms"] = _mean_ms(metrics, verb)
            result["bind_conflicts"] = metrics.get("suanpan_extender_bind_conflicts_total{}", 0.0)
        return result


async def _study(node_counts: tuple[int, ...]) -> list[Figure]:
    bin_dir = await asyncio.to_thread(ensure_binaries)
    port = free_ports(1)[0]
    env = await up(1, extender_url=f"http://127.0.0.1:{port}", bin_dir=bin_dir)
    cs = env.clusters[0]
    catalog = load_catalog()
    plain = {k: v for k, v in scheduler_config(catalog).items() if k != "extenders"}
    figures: list[Figure] = []
    try:
        added = 0
        for nodes in node_counts:
            async with _client(cs) as kc:
                await _add_nodes(kc, cs.name, added, nodes)
            added = nodes
            runs: dict[str, list[dict[str, float]]] = {m: [] for m in (WITHOUT, *FILTER_KEEPS)}
            for i, mode in enumerate(ORDER):
                name = f"bench-{nodes}-{i}-{mode}"
                workdir = env.workdir / name
                runs[mode].append(await _run(cs, bin_dir, catalog, plain, mode, port, workdir))
            figures += _figures(nodes, runs)
    finally:
        await down(env.workdir)
    return figures


async def _run(
    cs: ClusterState,
    bin_dir: Path,
    catalog: Catalog,
    plain: dict[str, Any],
    mode: str,
    port: int,
    workdir: Path,
) -> dict[str, float]:
    """One measurement in `mode` (its scheduler name: `workdir`'s name), with an extender of
    `--filter-keeps <mode>` started for it alone."""
    name = workdir.name
    if mode == WITHOUT:
        return await _measure(cs, bin_dir, plain, name, workdir, None)
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    extender = ExtenderProcess.start(
        cs.kubeconfig, port, workdir / "extender.log", "suanpan", "--filter-keeps", mode
    )
    try:
        await extender.wait_ready()
        config = scheduler_config(catalog, url=extender.url)
        return await _measure(cs, bin_dir, config, name, workdir, extender)
    finally:
        extender.stop()


def _mean_ms(metrics: dict[str, float], verb: str) -> float:
    """An extender's mean call time of `verb` (0 when never called)."""
    count = metrics.get(f"suanpan_extender_call_seconds_count{{verb={verb}}}", 0.0)
    total = metrics.get(f"suanpan_extender_call_seconds_sum{{verb={verb}}}", 0.0)
    return 1000 * total / count if count else 0.0


def _figures(nodes: int, runs: dict[str, list[dict[str, float]]]) -> list[Figure]:
    """The rates at `nodes` nodes without the extender and with it in each filter mode, and
    their ratios."""
    rate = {mode: statistics.mean(r["pods_per_s"] for r in found) for mode, found in runs.items()}
    params = {
        "nodes": nodes,
        "pods": PODS,
        "npus_per_pod": list(SHAPES),
        "each_run": {
            mode: [{k: round(v, 2) for k, v in r.items()} for r in found]
            for mode, found in runs.items()
        },
        "client_qps": 1000,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "kubernetes": "v1.36.2",
    }
    print(f"{nodes} nodes: {params}")
    with_, all_ = rate[FILTER_KEEPS_BEST], rate[FILTER_KEEPS_ALL]
    return [
        Figure(
            f"kube_scheduler_pods_per_s_with_extender_{nodes}_nodes",
            round(with_, 1),
            "pods/s",
            True,
            params,
        ),
        Figure(
            f"kube_scheduler_pods_per_s_without_extender_{nodes}_nodes",
            round(rate[WITHOUT], 1),
            "pods/s",
            True,
            params,
        ),
        Figure(
            f"kube_scheduler_extender_ratio_{nodes}_nodes",
            round(with_ / rate[WITHOUT], 3),
            "with / without",
            True,
            params,
        ),
        Figure(
            f"kube_scheduler_extender_ratio_filter_keeps_all_{nodes}_nodes",
            round(all_ / rate[WITHOUT], 3),
            "with (--filter-keeps all) / without",
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
