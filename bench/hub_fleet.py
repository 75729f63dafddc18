"""The whole hub at fleet scale, every part in its own process.

`suanpan-hub serve` (API, with its scheduling loop in the child process it starts) on an
embedded PostgreSQL, and 10 agents (`python -m deploy.sim_agent`) over simulated clusters of
1,000 nodes each (NVIDIA H100, Ascend 910B3, Cambricon MLU370 and Kunlunxin P800 nodes). The
agents stand for member clusters, which have machines of their own: on this one they run at
`nice 10` (their CPU is still reported). This process only drives the API and reads the
database:

1. burst: 10,000 jobs submitted through `POST /v1/job-batches` as fast as the API takes them;
   the time from the first submission until every one is placed (they all fit); they run
   `BURST_RUN_S` and succeed, so that the fleet has room again during the load;
2. under load: 10,000 more jobs queued, then 64 clients submit single jobs of the same mix
   for 30 s (several cycles: a window shorter than one cycle reads 0 decisions); the API's
   rate and latency with that backlog, and the placement decisions the loop writes meanwhile;
   these jobs run `RUN_S`, so the loop has work and the fleet room throughout: decisions per
   second measure the loop, not how soon the fleet is full or the backlog drained;
   cycle times are the gaps between the loop's placement transactions (one `now()` each).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import sqlalchemy as sa
import yaml

from bench.api_throughput import ADMIN, UNLIMITED, _load, member_token, wait_ready
from bench.hub_loop import random_manifest
from bench.procs import CpuMeter, descendants, rss_mib, tree
from bench.profile import LOOP_PARTS, Sampler, available, markdown
from bench.results import Figure
from bench.run import SECTIONS
from deploy.fleet import free_port
from deploy.local.kube import wait_for
from federation.store import migrate
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres
from federation.store.tables import clusters, jobs, nodes, placements
from federation.wire import annotations as ann

CLUSTERS = 10
NODES = 1000
BURST = 10_000
LOAD_S = 30.0
BURST_RUN_S = 20  # seconds a burst job runs once placed
RUN_S = 120  # seconds the jobs queued and submitted under load run
# The agents stand for member clusters, which run on machines of their own; sharing the hub's
# two cores here, they run at this niceness so that they take what the hub leaves
AGENT_NICE = 10
KINDS = (  # capacity and labels of the simulated nodes, by vendor, with the flavor they give
    ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
    ({"huawei.com/Ascend910B3": "8"}, {"node.kubernetes.io/npu.chip.name": "910B3"}),
    ({"cambricon.com/mlu": "8"}, {"cambricon.com/mlu.model": "MLU370"}),
    ({"kunlunxin.com/xpu": "8"}, {"xpu": "on"}),
)
FLAVORS = ("nvidia/H100-80GB", "huawei/Ascend910B3", "cambricon/MLU370-X8", "kunlunxin/P800")


def _profile(path: Path) -> None:
    doc = {
        "defaults": {"capacity": {"cpu": "128", "memory": "1Ti", "pods": "110"}, "labels": {}},
        "clusters": [
            {
                "name": f"c{c}",
                "nodes": [
                    {"name": f"c{c}-n{i:04d}", "capacity": cap, "labels": labels}
                    for i in range(NODES)
                    for cap, labels in [KINDS[i % len(KINDS)]]
                ],
            }
            for c in range(CLUSTERS)
        ],
    }
    path.write_text(yaml.safe_dump(doc))


def _manifest(rng: random.Random, n: int, run_s: int) -> dict[str, Any]:
    """A job of 1, 2 or 4 whole devices of one or two of the fleet's vendors that runs
    `run_s` seconds on the simulated clusters, then succeeds."""
    found = random_manifest(rng, n, FLAVORS, (1, 2, 4), shares=0.0)
    for task in found["spec"]["tasks"]:
        task["annotations"] = {ann.RUN_SECONDS: str(run_s)}
    return found


async def _queued(db: Database) -> tuple[int, int]:
    """(jobs, jobs still Queued)."""
    async with db.connection() as conn:
        total = await conn.scalar(sa.select(sa.func.count()).select_from(jobs))
        queued = await conn.scalar(
            sa.select(sa.func.count()).select_from(jobs).where(jobs.c.state == "Queued")
        )
    return int(total or 0), int(queued or 0)


async def _submit_batches(url: str, token: str, rng: random.Random, start: int, run_s: int) -> int:
    """BURST jobs in batches of 1,000, two requests at a time; how many were accepted."""
    headers = {"Authorization": f"Bearer {token}"}
    accepted = 0

    async def one(session: aiohttp.ClientSession, first: int) -> None:
        nonlocal accepted
        items = [
            {
                "idempotencyKey": f"fleet-{n}",
                "manifest": _manifest(rng, n, run_s),
            }
            for n in range(first, first + 1000)
        ]
        while True:  # a refused batch (a loaded hub's 503) is sent again: its keys make that safe
            async with session.post(url + "/v1/job-batches", json={"items": items}) as resp:
                body = await resp.json()
            if resp.status == 200:
                break
            print(f"batch refused ({resp.status}: {body.get('detail', '')}); sending it again")
            await asyncio.sleep(1.0)
        accepted += sum(o["status"] in (200, 201) for o in body["items"])

    async with aiohttp.ClientSession(headers=headers) as session:
        for pair in range(start, start + BURST, 2000):
            await asyncio.gather(one(session, pair), one(session, pair + 1000))
    return accepted


async def _placed_since(db: Database, since: float) -> int:
    """Placements the loop wrote after `since`: one per placement decision (a requeued job's
    new placement counts again, a requeue itself does not count against it)."""
    async with db.connection() as conn:
        placed = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(placements)
            .where(placements.c.created_at > sa.func.to_timestamp(since))
        )
    return int(placed or 0)


async def _cycle_gaps(db: Database, since: float) -> list[float]:
    """Seconds between the loop's consecutive placement transactions after `since`."""
    async with db.connection() as conn:
        rows = await conn.execute(
            sa.select(placements.c.created_at)
            .distinct()
            .where(placements.c.created_at > sa.func.to_timestamp(since))
            .order_by(placements.c.created_at)
        )
        stamps = [r[0].timestamp() for r in rows]
    return [b - a for a, b in itertools.pairwise(stamps)]


async def _admin(url: str) -> tuple[str, list[str]]:
    """Tenant `bench` with queue `q`: a member token, and one agent token per cluster."""
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN}"}) as s:
        member = await member_token(s, url, "bench")
        agent_tokens = []
        for c in range(CLUSTERS):
            body = {"name": f"agent-c{c}", "role": "agent", "cluster": f"c{c}"}
            async with s.post(url + "/v1/tokens", json=body) as r:
                agent_tokens.append((await r.json())["token"])
    return member, agent_tokens


async def _study(workdir: Path) -> list[Figure]:
    pg = EmbeddedPostgres()
    db_url = await pg.start()
    pg_pid = pg.pid
    assert pg_pid is not None
    await migrate.upgrade(db_url)
    db = Database(db_url)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DATABASE_URL": db_url, "SUANPAN_ADMIN_TOKEN": ADMIN}
    config = workdir / "hub.yaml"
    config.write_text(UNLIMITED)  # measure the hub, not its per-token rate limit (100/s)
    hub = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "api.hub_cli", "serve", f"--port={port}", f"--config={config}"),
        env=env,
    )
    agents: list[asyncio.subprocess.Process] = []
    try:
        await wait_ready(url)
        member, agent_tokens = await _admin(url)
        profile = workdir / "fleet.yaml"
        _profile(profile)
        for c, token in enumerate(agent_tokens):
            agents.append(
                await asyncio.create_subprocess_exec(
                    *("nice", "-n", str(AGENT_NICE)),
                    sys.executable,
                    "-m",
                    "deploy.sim_agent",
                    *("--hub", url, "--cluster", f"c{c}", "--simulated", str(profile)),
                    *("--metrics", f"127.0.0.1:{free_port()}"),
                    env={**os.environ, "SUANPAN_AGENT_TOKEN": token},
                )
            )

        async def fleet_ready() -> bool:
            async with db.connection() as conn:
                count = await conn.scalar(sa.select(sa.func.count()).select_from(nodes))
                ready = await conn.scalar(
                    sa.select(sa.func.count())
                    .select_from(clusters)
                    .where(clusters.c.state == "Ready")
                )
            return count == CLUSTERS * NODES and ready == CLUSTERS

        await wait_for("every node at the hub", fleet_ready, 600)
        rng = random.Random(19)

        began = time.perf_counter()
        accepted = await _submit_batches(url, member, rng, 0, BURST_RUN_S)
        submitted_s = time.perf_counter() - began

        async def burst_placed() -> bool:
            return (await _queued(db))[1] == 0

        await wait_for("the burst placed", burst_placed, 600)
        burst_s = time.perf_counter() - began
        print(
            f"burst: {accepted} jobs accepted in {submitted_s:.1f} s, all placed in {burst_s:.1f} s"
        )

        await _submit_batches(url, member, rng, BURST, RUN_S)
        _, queued_before = await _queued(db)
        since = time.time()
        meter = CpuMeter(
            api=lambda: [hub.pid],
            loop=lambda: descendants(hub.pid),
            postgres=lambda: tree(pg_pid),
            agents=lambda: [a.pid for a in agents],
        )
        samplers = (
            (Sampler([hub.pid], LOAD_S), Sampler(descendants(hub.pid), LOAD_S))
            if available()
            else None
        )
        meter.start()
        for sampler in samplers or ():
            await sampler.start()
        n, lat = await _load(
            url, member, 64, LOAD_S, lambda i: _manifest(rng, 2 * BURST + i, RUN_S)
        )
        cpu = meter.stop()
        decided = await _placed_since(db, since)
        if samplers is not None:  # where the API's and the loop's CPU go under the load
            api_profile, loop_profile = [await s.result() for s in samplers]
            found = (
                markdown(
                    api_profile,
                    "Where the API's CPU goes with 10 agents reporting and 10,000 jobs queued",
                    1000 * cpu["api"] / max(n, 1),
                )
                + "\n"
                + markdown(
                    loop_profile,
                    "Where the scheduling loop's CPU goes meanwhile",
                    1000 * cpu["loop"] / max(decided, 1),
                    "decision",
                    LOOP_PARTS,
                )
            )
            SECTIONS.mkdir(exist_ok=True)
            (SECTIONS / "hub_fleet.md").write_text(found)
            print(found)
        gaps = sorted(await _cycle_gaps(db, since))
        lat.sort()
        async with db.connection() as conn:
            db_mib = (
                await conn.scalar(sa.text("SELECT pg_database_size(current_database())"))
            ) / 2**20
        rss = sum(rss_mib(pid) for pid in tree(hub.pid))
    finally:
        for p in [*agents, hub]:
            if p.returncode is None:
                p.terminate()
        for p in [*agents, hub]:
            await p.wait()
        await db.close()
        await pg.stop()
    params = {
        "clusters": CLUSTERS,
        "nodes_per_cluster": NODES,
        "burst_jobs": accepted,
        "queued_at_load_start": queued_before,
        "load_s": LOAD_S,
        "clients": 64,
        **{f"{k}_cpu_ms_per_submission": round(1000 * v / max(n, 1), 2) for k, v in cpu.items()},
        **{f"{k}_cores_busy": round(v / LOAD_S, 2) for k, v in cpu.items()},
        # of the time each group was ready to run, the share it waited for a CPU (the rest it
        # ran): near 0.5, a group gets half the CPU it could use on this machine
        **{
            f"{k}_cpu_wait_share": round(w / max(w + cpu[k], 1e-9), 2)
            for k, w in meter.waited.items()
        },
        "loop_cpu_ms_per_decision": round(1000 * cpu["loop"] / max(decided, 1), 2),
        "cycles_seen": len(gaps) + 1,
        "load_average": os.getloadavg()[0],
    }
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else 0.0
    cycle_p50 = statistics.median(gaps) * 1000 if gaps else 0.0
    cycle_p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] * 1000 if gaps else 0.0
    figures = [
        Figure("hub_burst_10k_place_all_s", burst_s, "s", False, params),
        Figure("fleet_api_submissions_per_s_c64", n / LOAD_S, "submissions/s", True, params),
        Figure("fleet_api_submit_p99_ms_c64", p99, "ms", False, params),
        Figure("hub_loop_decisions_per_s_under_load", decided / LOAD_S, "jobs/s", True, params),
        Figure("hub_cycle_p50_ms_under_load", cycle_p50, "ms", False, params),
        Figure("hub_cycle_p99_ms_10k_pending", cycle_p99, "ms", False, params),
        Figure("hub_rss_mib_fleet", rss, "MiB", False, params),
        Figure("hub_database_mib_fleet", db_mib, "MiB", False, params),
    ]
    for f in figures:
        print(f"{f.name}: {f.value:.1f} {f.unit}")
    print(params)
    return figures


def run() -> list[Figure]:
    """Figures of `make bench`."""
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_study(Path(tmp)))


if __name__ == "__main__":
    run()
