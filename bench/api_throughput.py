"""Submission throughput and latency of the hub API at 1, 16 and 64 concurrent clients, with
the queue empty and again (64 clients) with 10,000 jobs queued.

The hub runs as real `suanpan-hub serve` processes (sharing one port via SO_REUSEPORT, each with
its scheduling loop in a child process, one of them leading) on an embedded PostgreSQL; the load
generator is this process. Everything stays on 127.0.0.1. No cluster is registered, so queued
jobs stay queued: the loop cycles over the backlog while the API is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.procs import CpuMeter, descendants, tree
from bench.profile import Sampler, available, markdown
from bench.results import Figure
from bench.run import SECTIONS
from deploy.fleet import free_port
from federation.store import migrate
from federation.store.embedded import EmbeddedPostgres

ADMIN = "sp_bench_admin"
UNLIMITED = "rateLimits: {enabled: false}\n"  # measure the hub, not its rate limits
CONCURRENCY = (1, 16, 64)
DURATION_S = 8.0


@contextlib.contextmanager
def config_file(text: str) -> Iterator[Path]:
    """A hub configuration file holding `text`, for the block (hubs read it as they start)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hub.yaml"
        path.write_text(text)
        yield path


def manifest(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": f"bench-{i}", "labels": {"bench": "api"}},
        "spec": {
            "queue": "q",
            "tasks": [
                {
                    "name": "w",
                    "replicas": 2,
                    "images": {"nvidia": "pytorch:2.4", "huawei": "mindspore:2.3"},
                    "resources": {
                        "cpu": "8",
                        "memory": "64Gi",
                        "accelerators": {"count": 8, "anyOf": [{"flavor": "huawei/Ascend910B3"}]},
                    },
                }
            ],
        },
    }


async def member_token(session: aiohttp.ClientSession, url: str, tenant: str) -> str:
    """A member token of a new tenant with queue `q` (what `manifest` submits to), made with
    the admin `session`."""
    await session.post(url + "/v1/tenants", json={"name": tenant})
    await session.post(url + f"/v1/tenants/{tenant}/queues", json={"name": "q"})
    body = {"name": f"{tenant}-member", "role": "member", "tenant": tenant}
    async with session.post(url + "/v1/tokens", json=body) as resp:
        return str((await resp.json())["token"])


async def wait_ready(url: str, seconds: float = 90.0) -> None:
    """Until the hub at `url` answers /readyz (a loaded machine starts it slowly)."""
    async with aiohttp.ClientSession() as s:
        for _ in range(int(seconds * 10)):
            try:
                async with s.get(url + "/readyz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("hub did not become ready")


async def _load(
    url: str,
    token: str,
    clients: int,
    duration: float,
    make: Callable[[int], dict[str, Any]] = manifest,
) -> tuple[int, list[float]]:
    """`clients` concurrent submitters of `make(i)` for `duration` seconds: how many were
    accepted, and each one's latency."""
    latencies: list[float] = []
    counter = 0
    deadline = time.perf_counter() + duration
    connector = aiohttp.TCPConnector(limit=clients)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def client() -> None:
            nonlocal counter
            while time.perf_counter() < deadline:
                counter += 1
                start = time.perf_counter()
                async with session.post(url + "/v1/jobs", json=make(counter)) as resp:
                    await resp.read()
                    if resp.status != 201:
                        raise RuntimeError(f"submit failed: {resp.status}")
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(client() for _ in range(clients)))
    return len(latencies), latencies


BATCH = 1000
BATCHES = 10


async def _batches(hubs: Hubs, token: str) -> Figure:
    """Jobs/s through `POST /v1/job-batches`: BATCHES requests of BATCH jobs, two at a time."""
    url = hubs.url
    meter = hubs.meter()
    headers = {"Authorization": f"Bearer {token}"}
    done = 0

    async def one(session: aiohttp.ClientSession, start: int) -> None:
        nonlocal done
        items = [
            {"idempotencyKey": f"sweep-{start + i}", "manifest": manifest(start + i)}
            for i in range(BATCH)
        ]
        async with session.post(url + "/v1/job-batches", json={"items": items}) as resp:
            body = await resp.json()
        done += sum(o["status"] == 201 for o in body["items"])

    began = time.perf_counter()
    meter.start()
    async with aiohttp.ClientSession(headers=headers) as session:
        for pair in range(0, BATCHES, 2):
            await asyncio.gather(*(one(session, (pair + k) * BATCH) for k in range(2)))
    cpu = meter.stop()
    seconds = time.perf_counter() - began
    per = {f"{k}_cpu_ms_per_job": round(1000 * v / max(done, 1), 2) for k, v in cpu.items()}
    print(f"batch: {done / seconds:7.0f} jobs/s ({BATCHES} x {BATCH})  cpu/job: {per}")
    params = {"batch": BATCH, "batches": BATCHES, **per, "load_average": os.getloadavg()[0]}
    return Figure("api_batch_jobs_per_s", done / seconds, "jobs/s", True, params)


@dataclass(frozen=True)
class Hubs:
    """The hub processes under measurement and their database server."""

    url: str
    api: list[int]  # the `serve` processes
    postgres: int

    def meter(self) -> CpuMeter:
        """CPU of the API processes, of their scheduling children, and of PostgreSQL."""
        return CpuMeter(
            api=lambda: self.api,
            loop=lambda: descendants(*self.api),
            postgres=lambda: tree(self.postgres),
        )


async def _round(
    hubs: Hubs, token: str, clients: int, suffix: str, profile: bool = False
) -> list[Figure]:
    """Rate, p50 and p99 of `clients` submitting for DURATION_S, CPU per submission of each
    group of processes; with `profile`, where the API processes' CPU goes (a report section)."""
    meter = hubs.meter()
    sampler = Sampler(hubs.api, DURATION_S) if profile and available() else None
    meter.start()
    if sampler is not None:
        await sampler.start()
    n, lat = await _load(hubs.url, token, clients, DURATION_S)
    cpu = meter.stop()
    lat.sort()
    per = {name: round(1000 * seconds / max(n, 1), 2) for name, seconds in cpu.items()}
    params = {
        "clients": clients,
        "hub_processes": len(hubs.api),
        "duration_s": DURATION_S,
        "api_cpu_ms_per_submission": per["api"],
        "loop_cpu_ms_per_submission": per["loop"],
        "postgres_cpu_ms_per_submission": per["postgres"],
        "load_average": os.getloadavg()[0],
    }
    p50 = statistics.median(lat) * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    print(
        f"c={clients:3d}{suffix}: {n / DURATION_S:7.0f}/s  p50 {p50:6.1f} ms  p99 {p99:6.1f} ms"
        f"  cpu/submission: api {per['api']} ms, loop {per['loop']} ms,"
        f" postgres {per['postgres']} ms  (load {params['load_average']:.1f})"
    )
    if sampler is not None:
        found = await sampler.result()
        section = markdown(found, f"Where the API's CPU goes: {clients} clients", per["api"])
        SECTIONS.mkdir(exist_ok=True)
        (SECTIONS / "api_throughput.md").write_text(section)
        print(section)
    rate = n / DURATION_S
    return [
        Figure(f"api_submissions_per_s_c{clients}{suffix}", rate, "submissions/s", True, params),
        Figure(f"api_submit_p50_ms_c{clients}{suffix}", p50, "ms", False, params),
        Figure(f"api_submit_p99_ms_c{clients}{suffix}", p99, "ms", False, params),
        Figure(f"api_cpu_ms_per_submission_c{clients}{suffix}", per["api"], "ms", False, params),
    ]


async def start_hubs(
    db_url: str, workers: int, config: Path
) -> tuple[str, list[asyncio.subprocess.Process]]:
    """`workers` hub processes (each with its loop in a child, one leading) sharing one free
    port, configured by `config`, ready; their URL and processes."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "SUANPAN_ADMIN_TOKEN": ADMIN,
        "SUANPAN_PORT": str(port),
    }
    procs = [
        await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "api.hub_cli", "serve", f"--config={config}"), env=env
        )
        for _ in range(workers)
    ]
    try:
        await wait_ready(url)
    except BaseException:
        for p in procs:
            p.terminate()
        raise
    return url, procs


async def _study(workers: int) -> list[Figure]:
    pg = EmbeddedPostgres()
    db_url = await pg.start()
    try:
        assert pg.pid is not None
        await migrate.upgrade(db_url)
        with config_file(UNLIMITED) as config:  # kept: a restarted scheduling child reads it
            url, procs = await start_hubs(db_url, workers, config)
            try:
                return await _measure(Hubs(url, [p.pid for p in procs], pg.pid))
            finally:
                for p in procs:
                    p.terminate()
                for p in procs:
                    await p.wait()
    finally:
        await pg.stop()


async def _measure(hubs: Hubs) -> list[Figure]:
    """Every round, on hubs started and ready."""
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN}"}) as s:
        token = await member_token(s, hubs.url, "bench")
    await _load(hubs.url, token, 4, 1.0)  # warm-up
    figures: list[Figure] = []
    for clients in CONCURRENCY:
        figures += await _round(hubs, token, clients, "", profile=clients == 64)
    figures.append(await _batches(hubs, token))  # leaves BATCH x BATCHES jobs queued
    figures += await _round(hubs, token, 64, f"_queued_{BATCH * BATCHES // 1000}k")
    return figures


def run(workers: int = 2) -> list[Figure]:
    """Measure the API submission figures."""
    return asyncio.run(_study(workers))


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
