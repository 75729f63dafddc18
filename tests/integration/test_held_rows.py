"""The loop's row cache fetches only the held and queued jobs whose rows were written, and
still reads what a fresh read does.

Jobs are placed by the real loop, more wait, more than the (shrunk) window of queued jobs a
cycle considers, so that queued jobs rotate out of it and back; then a random run of writes
from everyone who writes them (an agent's status reports, a user's cancel and checkpoint, the
loop placing newcomers, a gang failing to start, and direct row updates of a job's priority,
its placement's revision, its queue and tenant), one to three between two reads: a read
through a warm cache equals one with a cold cache on the same window, and the jobs nobody
wrote keep what the cache derived from them (the same `JobRef` object: their rows were not
fetched again), a queued job back in the window included.
"""

from __future__ import annotations

import random
import time

import pytest
import sqlalchemy as sa

from federation.catalog import load_catalog
from federation.controllers import snapshot
from federation.controllers.pacing import Pace, Window
from federation.controllers.scheduler import SchedulerLoop
from federation.scheduling.model import Placement
from federation.store.tables import clusters, events, jobs, placements, queues, tenants
from tests.integration.conftest import Hub
from tests.integration.test_hub_flow import _job, _node

pytestmark = pytest.mark.integration

KINDS = (
    *("running", "running", "cancel", "checkpoint", "priority", "revision"),
    *("queued priority", "gang failed", "queue", "tenant", "newcomer", "cluster"),
)
WEIGHTS = (1, 1, 1, 1, 1, 1, 1, 1, 0.2, 0.2, 0.3, 0.1)  # writes that touch every job are rarer


def _by_job(found: tuple[Placement, ...]) -> list[Placement]:
    return sorted(found, key=lambda p: (p.job.id, p.replicas))


async def _jobs(hub: Hub, *states: str) -> list[str]:
    async with hub.db.transaction() as conn:
        rows = await conn.execute(sa.select(jobs.c.id).where(jobs.c.state.in_(states)))
        return sorted(str(r.id) for r in rows)


async def test_a_warm_held_row_cache_reads_what_a_fresh_read_does(
    hub: Hub,
) -> None:
    # a window of 4 over the 6+ waiting jobs: queued jobs rotate out and back in
    window = Window(1, 3)
    rng = random.Random(11)
    user = await hub.tenant_with_queue("acme")
    _, issued = await hub.call(
        "POST", "/v1/tokens", json={"name": "east-agent", "role": "agent", "cluster": "east"}
    )
    agent = issued["token"]
    await hub.call("POST", "/v1/agent/register", agent, json={"cluster": "east"})
    nodes = [_node(f"n{i}") for i in range(6)]
    await hub.call(
        "POST", "/v1/agent/inventory", agent, json={"generation": 1, "full": True, "nodes": nodes}
    )
    loop = SchedulerLoop(hub.db, load_catalog())
    loop.pace = Pace(1.0, smallest=4, largest=4)  # it places a few of the waiting jobs a cycle
    assert await loop.leadership.acquire()
    for i in range(30):  # 24 fit
        await hub.call("POST", "/v1/jobs", user, json=_job(f"j{i}", 1, 2))
    await loop.cycle()

    cache = snapshot.CompiledCache()
    catalog = load_catalog()
    last: dict[str, snapshot.JobRef] = {}  # each job's JobRef when the cache last had it
    kept = 0
    for step in range(30):
        held = await _jobs(hub, "Placed", "Dispatched", "Running")
        waiting = await _jobs(hub, "Queued")
        touched: set[str] = set()
        said = []
        for _ in range(rng.randint(1, 3)):
            (kind,) = rng.choices(KINDS, WEIGHTS)
            job = rng.choice(waiting if kind in ("queued priority", "gang failed") else held)
            said.append(f"{kind} {job}")
            if kind == "newcomer":
                await hub.call("POST", "/v1/jobs", user, json=_job(f"late{step}", 1, 2))
                await loop.cycle()
                touched.add("*")
            elif kind == "running":
                update = {"job": job, "epoch": 1, "state": "Running"}
                await hub.call("POST", "/v1/agent/status", agent, json={"updates": [update]})
                touched.add(job)
            elif kind in ("cancel", "checkpoint"):
                await hub.call("POST", f"/v1/jobs/{job}/{kind}", user)
                touched.add(job)
            elif kind == "gang failed":  # the cluster reports it could not start the gang
                async with hub.db.transaction() as conn:
                    cluster_id = await conn.scalar(sa.select(clusters.c.id))
                    report = {"cluster_report": "Unschedulable", "cluster_id": str(cluster_id)}
                    await conn.execute(
                        sa.insert(events).values(
                            job_id=job, kind="Job", reason="Unschedulable", data=report
                        )
                    )
                touched.add(job)
            elif kind in ("priority", "queued priority"):
                async with hub.db.transaction() as conn:
                    await conn.execute(
                        sa.update(jobs).where(jobs.c.id == job).values(priority=rng.randint(0, 9))
                    )
                touched.add(job)
            elif kind == "revision":
                async with hub.db.transaction() as conn:
                    await conn.execute(
                        sa.update(placements)
                        .where(placements.c.job_id == job, placements.c.state == "Active")
                        .values(revision=placements.c.revision + 1)
                    )
                touched.add(job)
            elif kind == "cluster":  # renamed: in no job's stamp, yet every held job's
                async with hub.db.transaction() as conn:
                    await conn.execute(sa.update(clusters).values(name=f"east{step}"))
                touched.add("*")
            else:  # a queue's or a tenant's row: every job in it changes
                table = queues if kind == "queue" else tenants
                async with hub.db.transaction() as conn:
                    await conn.execute(sa.update(table).values(name=f"{kind}{step}"))
                touched.add("*")
        now = time.time()
        cold = snapshot.CompiledCache()
        cold.rotation = cache.rotation  # the same window
        async with hub.db.transaction() as conn:
            warm = await snapshot.read(conn, catalog, now=now, cache=cache, window=window)
            fresh = await snapshot.read(conn, catalog, now=now, cache=cold, window=window)
        for part in ("placements", "reservations"):
            assert _by_job(getattr(warm.snapshot, part)) == _by_job(
                getattr(fresh.snapshot, part)
            ), f"step {step}: {part} after {said}"
        assert warm.snapshot.preempting == fresh.snapshot.preempting
        assert warm.pending == fresh.pending, f"step {step}: {said}"
        assert warm.refs == fresh.refs and warm.invalid == fresh.invalid, f"step {step}: {said}"
        if "*" in touched:
            last.clear()
        for job in touched:
            last.pop(job, None)
        for job, ref in warm.refs.items():  # also a queued job back in the window
            if job in last:
                assert ref is last[job], f"step {step}: {job} fetched again"
                kept += 1
        last.update(warm.refs)
    assert kept > 100  # the identity check ran
