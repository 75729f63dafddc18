"""Failover with real processes: two `suanpan-hub serve` replicas on one PostgreSQL, agents as
their own processes (`python -m deploy.sim_agent`, given both hub addresses).

Measured, `ROUNDS` times each: the leader killed with `kill -9` → a job submitted to the
survivor placed (takeover); an agent killed with `kill -9` (its simulated cluster dies with it)
→ the cluster Offline at the hub (detection) and its fast job Running on the other cluster
(requeue-to-running); PostgreSQL stopped for `DB_DOWN_S` and started again → a new job placed
(database recovery, counted from the restart). Figures: p50 and p99 (max at these counts).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp

from bench.results import Figure
from deploy.fleet import PROFILE_PATH
from deploy.local.clusters import ClusterState
from deploy.local.processes import free_ports
from federation.store import migrate
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres

ADMIN = "sp_bench_failover_admin"
ROUNDS = int(os.environ.get("SUANPAN_FAILOVER_ROUNDS", "5"))
DB_DOWN_S = 5.0
CLUSTERS = ("dc-beijing", "dc-shenzhen")  # both offer nvidia/H100*
BIN = Path(sys.executable).parent
ANSWER_WITHIN = aiohttp.ClientTimeout(total=2)
CALL_WITHIN = aiohttp.ClientTimeout(total=10)
KUBE_NAMESPACE = "suanpan-bench"  # prefix of a real-cluster agent's tenant namespaces


def _log(path: Path) -> int:
    """A file descriptor appending to `path`, for a child's output."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


class Hubs:
    """Hub replicas as processes, restarted on demand."""

    def __init__(self, url: str, workdir: Path, count: int = 2, args: Sequence[str] = ()) -> None:
        self.db_url = url
        self.workdir = workdir
        self.ports = free_ports(count)
        self.args = list(args)  # more `serve` options, e.g. --config
        self.db_urls: dict[int, str] = {}  # a replica's own DATABASE_URL (default db_url)
        self.procs: dict[int, asyncio.subprocess.Process] = {}

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.ports]

    def log_path(self, port: int) -> Path:
        """Where replica `port` writes its output (kept across restarts)."""
        return self.workdir / f"hub-{port}.log"

    async def start(self, port: int) -> None:
        log = _log(self.log_path(port))
        self.procs[port] = await asyncio.create_subprocess_exec(
            str(BIN / "suanpan-hub"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *self.args,
            env={**os.environ, "DATABASE_URL": self.db_urls.get(port, self.db_url)},
            stdout=log,
            stderr=log,
        )
        os.close(log)
        proc = self.procs[port]

        async def up() -> bool:
            if proc.returncode is not None:
                tail = self.log_path(port).read_text()[-3000:]
                raise RuntimeError(f"hub {port} exited ({proc.returncode}):\n{tail}")
            return await _ok(f"http://127.0.0.1:{port}/healthz") and await scheduling(port)

        # up once its scheduling process runs too: a replica just restarted is not yet one
        # that could take over, and takeovers are measured from replicas that could
        await until(f"hub {port} up", up, 60)

    async def leader(self) -> int:
        """The port of the replica that leads."""
        found: list[int] = []

        async def led() -> bool:
            found[:] = [p for p in list(self.procs) if await leads(p)]
            return bool(found)

        await until("a leader", led, 30)
        return found[0]

    def kill(self, port: int) -> None:
        proc = self.procs.pop(port)
        if proc.returncode is None:  # one that exited by itself is the caller's to report
            proc.send_signal(signal.SIGKILL)

    def signal_all(self, port: int, sig: signal.Signals) -> None:
        """Send `sig` to the replica and its scheduling process (SIGSTOP freezes both)."""
        pid = self.procs[port].pid
        for child in [pid, *children(pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, sig)

    async def close(self) -> None:
        for port in list(self.procs):
            self.signal_all(port, signal.SIGCONT)  # a frozen replica must be able to die
        await _kill_all(self.procs)


def children(pid: int) -> list[int]:
    """The pids of the processes whose parent is `pid`."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


async def _kill_all(procs: dict[Any, asyncio.subprocess.Process]) -> None:
    """kill -9 every process left in `procs` (emptied) and reap them."""
    while procs:
        _, proc = procs.popitem()
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()


async def _ok(url: str) -> bool:
    try:
        async with aiohttp.ClientSession(timeout=ANSWER_WITHIN) as s, s.get(url) as r:
            return r.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def _metrics(port: int) -> str:
    """The replica's /metrics ("" when it does not answer within 2 s)."""
    try:
        async with (
            aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {ADMIN}"}, timeout=ANSWER_WITHIN
            ) as s,
            s.get(f"http://127.0.0.1:{port}/metrics") as r,
        ):
            return await r.text()
    except (aiohttp.ClientError, TimeoutError):
        return ""


async def leads(port: int) -> bool:
    """Whether the replica on `port` leads."""
    return "suanpan_scheduler_leader 1.0" in await _metrics(port)


async def scheduling(port: int) -> bool:
    """Whether the replica's scheduling process runs (it relays that process's metrics)."""
    return "suanpan_scheduler_leader " in await _metrics(port)


async def until(what: str, check: Callable[[], Awaitable[bool]], timeout_s: float) -> float:
    """Seconds until `check` holds (polled every 50 ms); raises TimeoutError after timeout_s."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


def manifest(
    name: str, run_s: int, failover: str, flavor: str = "nvidia/H100*", count: int = 8
) -> dict[str, Any]:
    """A one-pod job of `count` devices of `flavor` running `run_s` (simulated) seconds."""
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": name, "tenant": "bench"},
        "spec": {
            "queue": "default",
            "failover": failover,
            "tasks": [
                {
                    "name": "main",
                    "image": "busybox",
                    "annotations": {"suanpan.io/run-seconds": str(run_s)},
                    "resources": {
                        "cpu": "4",
                        "memory": "16Gi",
                        "accelerators": {"count": count, "anyOf": [{"flavor": flavor}]},
                    },
                }
            ],
        },
    }


class Api:
    """Admin calls to whichever hub answers."""

    def __init__(self, hubs: Hubs) -> None:
        self.hubs = hubs

    async def call(self, method: str, path: str, **kw: Any) -> Any:
        """The decoded answer of the first hub that answers below 500 (None: none did)."""
        headers = {"Authorization": f"Bearer {ADMIN}", **kw.pop("headers", {})}
        for url in self.hubs.urls:
            try:
                async with (
                    aiohttp.ClientSession(headers=headers, timeout=CALL_WITHIN) as s,
                    s.request(method, url + path, **kw) as r,
                ):
                    if r.status < 500:
                        return await r.json(content_type=None)
            except (aiohttp.ClientError, TimeoutError):  # down, or frozen: the next one
                continue
        return None

    async def submit(
        self,
        name: str,
        *,
        key: str = "",
        run_s: int = 100_000,
        failover: str = "fast",
        **shape: Any,
    ) -> str:
        """Submit until a hub acknowledges (safe to repeat with an idempotency key); `shape`:
        `manifest`'s flavor and count."""
        body = manifest(name, run_s, failover, **shape)
        headers = {"Idempotency-Key": key} if key else {}
        while True:
            reply = await self.call("POST", "/v1/jobs", json=body, headers=headers)
            if reply and "id" in reply:
                return str(reply["id"])
            if reply is not None:
                raise RuntimeError(f"submission refused: {reply}")
            await asyncio.sleep(0.05)

    async def job(self, job_id: str) -> dict[str, Any]:
        return dict(await self.call("GET", f"/v1/jobs/{job_id}") or {})

    async def cancel(self, job_id: str) -> None:
        await self.call("POST", f"/v1/jobs/{job_id}/cancel")


async def setup_tenancy(api: Api, clusters: Sequence[str] = CLUSTERS) -> dict[str, str]:
    """Tenant `bench` with queue `default`; the agent token of each of `clusters`."""
    await api.call("POST", "/v1/tenants", json={"name": "bench"})
    await api.call("POST", "/v1/tenants/bench/queues", json={"name": "default"})
    tokens = {}
    for cluster in clusters:
        issued = await api.call(
            "POST",
            "/v1/tokens",
            json={"name": f"{cluster}-agent", "role": "agent", "cluster": cluster},
        )
        tokens[cluster] = str(issued["token"])
    return tokens


async def clear_pods(cs: ClusterState) -> None:
    """Delete every pod in the tenant namespaces of the real-cluster agents (`KUBE_NAMESPACE`),
    so that a run leaves the cluster's devices free for whoever uses it next."""
    async with cs.client() as client:
        for ns in (await client.get("/api/v1/namespaces"))["items"]:
            name = ns["metadata"]["name"]
            if name.startswith(f"{KUBE_NAMESPACE}-"):
                await client.delete(f"/api/v1/namespaces/{name}/pods?gracePeriodSeconds=0")


class Agents:
    """Agent processes, each given its list of hub addresses: over a simulated cluster of the
    profile, or `suanpan-agent` over a real one for the clusters `kubeconfigs` names."""

    def __init__(
        self,
        urls: dict[str, list[str]],
        tokens: dict[str, str],
        workdir: Path,
        kubeconfigs: Mapping[str, str] | None = None,
    ) -> None:
        self.urls, self.tokens, self.workdir = urls, tokens, workdir
        self.kubeconfigs = dict(kubeconfigs or {})
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    def log_path(self, cluster: str) -> Path:
        """Where the agent of `cluster` writes its output (kept across restarts)."""
        return self.workdir / f"agent-{cluster}.log"

    async def start(self, cluster: str) -> None:
        log = _log(self.log_path(cluster))
        if cluster in self.kubeconfigs:
            backend = [str(BIN / "suanpan-agent"), "--kubeconfig", self.kubeconfigs[cluster]]
            backend += ["--namespace", KUBE_NAMESPACE]
        else:
            backend = [sys.executable, "-m", "deploy.sim_agent", "--simulated", str(PROFILE_PATH)]
            backend += ["--time-scale", "20"]
        self.procs[cluster] = await asyncio.create_subprocess_exec(
            *backend,
            "--hub",
            ",".join(self.urls[cluster]),
            "--cluster",
            cluster,
            # a port of its own choosing: one picked here may be taken by then (the chaos
            # long run lost its real agent to that once), and nothing here reads it
            "--metrics",
            "127.0.0.1:0",
            env={**os.environ, "SUANPAN_AGENT_TOKEN": self.tokens[cluster]},
            stdout=log,
            stderr=log,
        )
        os.close(log)

    def kill(self, cluster: str) -> None:
        proc = self.procs.pop(cluster)
        if proc.returncode is None:  # one that exited by itself is the caller's to report
            proc.send_signal(signal.SIGKILL)

    async def close(self) -> None:
        await _kill_all(self.procs)


def _stats(name: str, samples: list[float], params: dict[str, Any]) -> list[Figure]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    params = {**params, "rounds": len(samples)}
    return [
        Figure(f"{name}_p50_s", statistics.median(ordered), "s", False, params),
        Figure(f"{name}_p99_s", p99, "s", False, params),
    ]


async def _placed(api: Api, job_id: str) -> bool:
    return (await api.job(job_id)).get("state") in ("Placed", "Dispatched", "Running")


async def _running_on(api: Api, job_id: str, cluster: str | None) -> bool:
    job = await api.job(job_id)
    return job.get("state") == "Running" and cluster in (None, job.get("cluster"))


async def _offline(api: Api, cluster: str) -> bool:
    found = await api.call("GET", f"/v1/clusters/{cluster}")
    return bool(found and found["state"] == "Offline")


async def hub_database(pg: EmbeddedPostgres) -> str:
    """Start `pg`, apply the schema and give it the admin token `ADMIN`; its URL."""
    url = await pg.start()
    await migrate.upgrade(url)
    db = Database(url, pool_size=1)
    await ensure_admin_token(db, ADMIN)
    await db.close()
    return url


async def _run() -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="suanpan-failover-") as tmp:
        workdir = Path(tmp)
        pg = EmbeddedPostgres(workdir / "pg")
        url = await hub_database(pg)
        hubs = Hubs(url, workdir)
        agents: Agents | None = None
        try:
            for port in hubs.ports:
                await hubs.start(port)
            api = Api(hubs)
            tokens = await setup_tenancy(api)
            agents = Agents(dict.fromkeys(CLUSTERS, hubs.urls), tokens, workdir)
            for cluster in CLUSTERS:
                await agents.start(cluster)
            takeover, detection, requeue, db_recovery = [], [], [], []
            for i in range(ROUNDS):
                leader = await hubs.leader()
                hubs.kill(leader)
                killed = time.monotonic()
                job_id = await api.submit(f"takeover-{i}")
                await until("placed after takeover", partial(_placed, api, job_id), 60)
                takeover.append(time.monotonic() - killed)
                await api.cancel(job_id)
                await hubs.start(leader)
            for i in range(ROUNDS):
                job_id = await api.submit(f"moved-{i}")
                await until("running", partial(_running_on, api, job_id, None), 60)
                lost = str((await api.job(job_id))["cluster"])
                other = next(c for c in CLUSTERS if c != lost)
                agents.kill(lost)
                killed = time.monotonic()
                await until("cluster Offline", partial(_offline, api, lost), 60)
                detection.append(time.monotonic() - killed)
                await until("running elsewhere", partial(_running_on, api, job_id, other), 60)
                requeue.append(time.monotonic() - killed)
                await api.cancel(job_id)
                await agents.start(lost)
            for i in range(ROUNDS):
                await pg.stop()
                await asyncio.sleep(DB_DOWN_S)
                pg = EmbeddedPostgres(workdir / "pg")
                await pg.start()
                back = time.monotonic()
                job_id = await api.submit(f"after-db-{i}")
                await until("placed after the restart", partial(_placed, api, job_id), 60)
                db_recovery.append(time.monotonic() - back)
                await api.cancel(job_id)
            params = {"hubs": 2, "clusters": len(CLUSTERS), "lease_s": 8, "renew_s": 2}
            return [
                *_stats("failover_leader_kill_takeover", takeover, params),
                *_stats("failover_cluster_loss_detection", detection, params),
                *_stats("failover_requeue_to_running", requeue, params),
                *_stats(
                    "failover_database_restart_recovery",
                    db_recovery,
                    {**params, "down_s": DB_DOWN_S},
                ),
            ]
        finally:
            if agents is not None:
                await agents.close()
            await hubs.close()
            await pg.stop()


def run() -> list[Figure]:
    """The study's figures."""
    return asyncio.run(_run())


if __name__ == "__main__":
    for figure in run():
        print(f"{figure.name}: {figure.value:.2f} {figure.unit}")
