"""The hub's real scheduling loop on PostgreSQL: cycle time and decisions per second.

An embedded PostgreSQL holds 10 clusters x 1,000 nodes (Ascend 910B3 and NVIDIA H100, 8
devices each, registered through the agents' store functions) and 10,000 queued jobs
compiled by the real compiler (1-8 devices, one or two acceptable flavors, some 2-replica
gangs, some shares). `SchedulerLoop.cycle()` then runs until nothing more is placed; each cycle
is read (snapshot) -> core -> write-back, timed per phase. No agents run: placed jobs keep
their reservations, so the fleet fills as a burst would.

Cycles consider the window the loop's pace gives them (`federation/controllers/pacing.py`:
sized to take `scheduling.cycleTargetSeconds`). Full fleet: 15,000 more 4-device jobs are then
queued; once the fleet is full and thousands wait, one cycle over the largest window (5,000)
tries every job in it (as a loop without parked jobs would) and the next ones skip the parked
jobs (`federation/scheduling/parking.py`).

Cold start: the placed jobs are then finished and copied up to 100,000 finished jobs, 10,000
new jobs are queued, and a new loop (empty caches, as after a restart) runs its first cycle.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import statistics
import time
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from api.hub_cli import GC_THRESHOLDS
from bench.results import Figure
from federation.catalog import load_catalog
from federation.compiler import compile_job
from federation.controllers.pacing import LARGEST, Pace
from federation.controllers.scheduler import CycleReport, SchedulerLoop
from federation.spec import JobManifest
from federation.store import agents, migrate, registration, tenancy
from federation.store import jobs as job_store
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres
from federation.wire.agent import DeviceInfo, InventoryReport, NodeInfo, Registration

CLUSTERS = 10
NODES = 1000
PENDING = 10_000
FLAVORS = ("huawei/Ascend910B3", "nvidia/H100-80GB")
FINISHED = 100_000
FULL_EXTRA = 15_000  # 4-device jobs queued once the first ones are placed: the fleet fills
PARKED_CYCLES = 3

# Bench-only bulk rows (the product writes states through federation.store.lifecycle).
_FINISH_AND_COPY = sa.text(
    """
    UPDATE placements SET state = 'Released', released_at = now();
    UPDATE jobs SET state = 'Succeeded', finished_at = now(), cluster_id = NULL;
    INSERT INTO jobs (id, tenant_id, queue_id, name, labels, spec, compiled, state, priority,
                      priority_class, preemptible, finished_at)
    SELECT gen_random_uuid(), j.tenant_id, j.queue_id, j.name, j.labels, j.spec, j.compiled,
           s.state, j.priority, j.priority_class, j.preemptible,
           CASE WHEN s.state = 'Queued' THEN NULL ELSE now() END
    FROM (SELECT * FROM jobs ORDER BY seq LIMIT 1) AS j,
         (SELECT CASE WHEN g <= :pending THEN 'Queued' ELSE 'Succeeded' END AS state
          FROM generate_series(1, :rows) AS g) AS s;
    INSERT INTO tasks (job_id, name, replicas)
    SELECT id, 'w', 1 FROM jobs WHERE id NOT IN (SELECT job_id FROM tasks);
    """
)


def _node(cluster: int, i: int) -> NodeInfo:
    flavor = FLAVORS[i % 2]
    return NodeInfo(
        name=f"c{cluster}-n{i}",
        labels={"suanpan.io/cluster": f"c{cluster}"},
        cpu_milli=192_000,
        memory_mib=2_048_000,
        devices=[DeviceInfo(flavor=flavor, index=d, memory_mib=65536) for d in range(8)],
    )


def random_manifest(
    rng: random.Random,
    n: int,
    flavors: tuple[str, ...] = FLAVORS,
    counts: tuple[int, ...] = (1, 2, 4, 8),
    shares: float = 0.1,
) -> dict[str, Any]:
    """Job `j<n>`: one or two acceptable `flavors`, a share of half a device with probability
    `shares` else one of `counts` devices; a fifth of them 2-replica gangs."""
    accel: dict[str, Any] = {
        "anyOf": [{"flavor": f} for f in rng.sample(flavors, rng.choice((1, 2)))]
    }
    if rng.random() < shares:
        accel["fraction"] = 0.5
    else:
        accel["count"] = rng.choice(counts)
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": f"j{n}"},
        "spec": {
            "queue": "q",
            "tasks": [
                {
                    "name": "w",
                    "image": "img",
                    "replicas": 2 if rng.random() < 0.2 else 1,
                    "resources": {"cpu": "4", "memory": "16Gi", "accelerators": accel},
                }
            ],
        },
    }


async def _fill(db: Database) -> None:
    async with db.transaction() as conn:
        for c in range(CLUSTERS):
            cluster_id = await registration.accept(conn, f"c{c}", create=True)
            await agents.register(conn, cluster_id, Registration(cluster=f"c{c}"))
            await agents.apply_inventory(
                conn,
                cluster_id,
                InventoryReport(generation=1, full=True, nodes=[_node(c, i) for i in range(NODES)]),
            )
        tenant = await tenancy.create_tenant(conn, "bench")
        await tenancy.create_queue(conn, tenant, "q", cohort=None, weight=1, quota={})
    rng = random.Random(7)
    await _queue(db, (random_manifest(rng, n) for n in range(PENDING)))


async def _queue(db: Database, manifests: Iterable[dict[str, Any]]) -> None:
    """Submit `manifests` to tenant `bench`'s queue `q`, 1,000 a transaction."""
    catalog = load_catalog()
    async with db.transaction() as conn:
        tenant = await tenancy.get_tenant(conn, "bench")
        queue = await tenancy.get_queue(conn, tenant.id, "q")
    docs = list(manifests)
    for start in range(0, len(docs), 1000):
        async with db.transaction() as conn:
            for doc in docs[start : start + 1000]:
                manifest = JobManifest.model_validate(doc)
                compiled = compile_job(catalog, manifest)
                await job_store.submit(
                    conn,
                    job_store.NewJob(
                        tenant_id=tenant.id,
                        tenant=tenant.name,
                        queue_id=queue.id,
                        queue="q",
                        name=manifest.metadata.name,
                        labels={},
                        spec=manifest.model_dump(mode="json", by_alias=True, exclude_none=True),
                        compiled=compiled.model_dump(mode="json", by_alias=True),
                        priority=0,
                        priority_class="normal",
                        preemptible=False,
                        tasks=[(t.name, t.replicas) for t in compiled.tasks],
                    ),
                )


async def _full_fleet(db: Database, loop: SchedulerLoop) -> tuple[CycleReport, list[CycleReport]]:
    """Queue `FULL_EXTRA` more 4-device jobs: the fleet fills and thousands wait. Then one cycle
    that tries every waiting job (nothing parked, as without parking) and `PARKED_CYCLES`
    cycles that skip the parked ones."""
    rng = random.Random(11)
    extra = []
    for n in range(PENDING, PENDING + FULL_EXTRA):
        doc = random_manifest(rng, n, counts=(4,), shares=0.0)
        doc["spec"]["tasks"][0]["replicas"] = 1
        extra.append(doc)
    await _queue(db, extra)
    while (await loop.cycle()).written.placed:
        pass
    loop._parked = None  # bench-only: the counterfactual cycle that tries everything
    loop.pace = Pace(loop.config.cycle_target_s, smallest=LARGEST)  # the largest window
    trying = await loop.cycle()
    parked = [await loop.cycle() for _ in range(PARKED_CYCLES)]
    print("full fleet, trying all:", trying)
    print("full fleet, parked:", parked[-1])
    return trying, parked


async def measure() -> tuple[
    list[CycleReport], tuple[float, CycleReport], tuple[CycleReport, list[CycleReport]]
]:
    """Cycles of the real loop over a filled database, until one places nothing; the fleet
    filled with a queue waiting (`_full_fleet`); then the first cycle of a restarted loop over
    100,000 finished and 10,000 queued jobs."""
    embedded = EmbeddedPostgres()
    url = await embedded.start()
    try:
        await migrate.upgrade(url)
        db = Database(url, custom_plans=True)  # as the hub's scheduling process
        try:
            await _fill(db)
            loop = SchedulerLoop(db, load_catalog())
            assert await loop.leadership.acquire()
            alive = asyncio.create_task(loop.leadership.keep_alive())  # as the loop leads
            reports = []
            while True:
                report = await loop.cycle()
                print(report)
                reports.append(report)
                if not report.written.placed:
                    break
            full = await _full_fleet(db, loop)
            await loop.leadership.release()
            await alive
            async with db.transaction() as conn:
                for statement in _FINISH_AND_COPY.text.split(";"):
                    if statement.strip():
                        await conn.execute(
                            sa.text(statement),
                            {"pending": PENDING, "rows": FINISHED},
                        )
            restarted = SchedulerLoop(db, load_catalog())
            assert await restarted.leadership.acquire()
            alive = asyncio.create_task(restarted.leadership.keep_alive())
            start = time.perf_counter()
            first = await restarted.cycle()
            cold = time.perf_counter() - start
            await restarted.leadership.release()
            await alive
            return reports, (cold, first), full
        finally:
            await db.close()
    finally:
        await embedded.stop()


def run() -> list[Figure]:
    """Figures of `make bench`."""
    gc.set_threshold(*GC_THRESHOLDS)  # as `suanpan-hub schedule` runs the loop
    start = time.perf_counter()
    reports, (cold_s, first), (trying, parked) = asyncio.run(measure())
    elapsed = time.perf_counter() - start
    placed = sum(r.written.placed for r in reports)
    busy = sum(r.seconds for r in reports)
    cycles = sorted(r.seconds for r in reports)
    cpu = sorted(r.cpu_s for r in reports)
    params = {
        "clusters": CLUSTERS,
        "nodes_per_cluster": NODES,
        "pending": PENDING,
        "cycles": len(reports),
        "placed": placed,
        "read_s": round(sum(r.read_s for r in reports), 2),
        "core_s": round(sum(r.core_s for r in reports), 2),
        "write_s": round(sum(r.write_s for r in reports), 2),
        # wall-clock times stretch with the machine's load; the loop's own CPU time does not
        "cycle_cpu_s": [round(c, 2) for c in cpu],
        "cpu_ms_per_decision": round(1000 * sum(cpu) / max(placed, 1), 3),
        "load_average": os.getloadavg()[0],
        "setup_and_cycles_s": round(elapsed, 1),
    }
    return [
        Figure("hub_loop_decisions_per_s", placed / busy if busy else 0.0, "jobs/s", True, params),
        Figure(
            "hub_cycle_p50_ms_10k_pending", statistics.median(cycles) * 1000, "ms", False, params
        ),
        Figure("hub_cycle_max_ms_10k_pending", cycles[-1] * 1000, "ms", False, params),
        Figure(
            "hub_cycle_cpu_p50_ms_10k_pending", statistics.median(cpu) * 1000, "ms", False, params
        ),
        Figure(
            "hub_loop_decisions_per_cpu_s",
            placed / sum(cpu) if sum(cpu) else 0.0,
            "jobs/CPU-s",
            True,
            params,
        ),
        Figure(
            "hub_cycle_ms_full_fleet_trying_all",
            trying.seconds * 1000,
            "ms",
            False,
            {"waiting": trying.pending, "cpu_s": round(trying.cpu_s, 2)},
        ),
        Figure(
            "hub_cycle_ms_full_fleet_parked",
            statistics.median(r.seconds for r in parked) * 1000,
            "ms",
            False,
            {
                "waiting": parked[-1].pending,
                "parked": parked[-1].parked,
                "cpu_s": [round(r.cpu_s, 2) for r in parked],
            },
        ),
        Figure(
            "hub_cold_start_first_decision_s",
            cold_s,
            "s",
            False,
            {
                "finished_jobs": FINISHED,
                "pending": PENDING,
                "nodes": CLUSTERS * NODES,
                "first_cycle_placed": first.written.placed,
                "read_s": round(first.read_s, 2),
                "core_s": round(first.core_s, 2),
                "cpu_s": round(first.cpu_s, 2),
                "load_average": os.getloadavg()[0],
            },
        ),
    ]


if __name__ == "__main__":
    for f in run():
        print(f"{f.name}: {f.value:.1f} {f.unit}  {f.params}")
