"""A status report applied set-wise gives exactly what its updates give one by one.

Two identical sets of thousands of jobs, in every state a report can meet (placed, dispatched,
waiting, running, preempting, finished, requeued, placed on another cluster, a placement that
failed before), get the same reports of mixed transitions (stale epochs, repeats of a job in
one report, re-sends of a whole report): one set as whole reports, the other one update per
report. Jobs, placements, events and outcomes must match, and the states match a simple model
of the lifecycle.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa

from federation.hubconfig import RetryPolicy
from federation.store import agents
from federation.store import jobs as job_store
from federation.store.clusters import ensure_cluster
from federation.store.database import Database
from federation.store.lifecycle import NewPlacement, move_job, place_jobs
from federation.store.tables import events, jobs, placements
from federation.wire.agent import Registration, StatusUpdate
from tests.integration.conftest import statements_sent, store_queue, stored_job

pytestmark = pytest.mark.integration

JOBS = 1200
RETRY = RetryPolicy(max_failures=2)
REPORTS = ("Applied", "Running", "Succeeded", "Failed", "Evicted", "Unschedulable")
# an update as drawn: (job index, report, epoch offset, message)
Drawn = tuple[int, str, int, str]


@dataclass
class JobSet:
    """One materialized set: its clusters and jobs (by index)."""

    own: uuid.UUID
    own_name: str
    other: uuid.UUID
    ids: list[uuid.UUID]

    def updates(self, drawn: list[Drawn], epochs: dict[int, int]) -> list[StatusUpdate]:
        return [
            StatusUpdate(
                job=self.ids[i],
                epoch=max(1, epochs.get(i, 1) + offset),
                state=state,  # type: ignore[arg-type]
                reason="Quota" if message else "",
                message=message,
                running=1 if state == "Running" else 0,
            )
            for i, state, offset, message in drawn
        ]


async def _cluster(db: Database, name: str) -> uuid.UUID:
    async with db.transaction() as conn:
        cluster_id = await ensure_cluster(conn, name)
        await agents.register(conn, cluster_id, Registration(cluster=name))
    return cluster_id


async def _versions(db: Database, ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[str, int]]:
    async with db.connection() as conn:
        rows = await conn.execute(
            sa.select(jobs.c.id, jobs.c.state, jobs.c.version).where(jobs.c.id.in_(ids))
        )
        return {r.id: (r.state, r.version) for r in rows}


async def _place(
    db: Database, js: JobSet, which: list[int], where: dict[int, bool], epochs: dict[int, int]
) -> None:
    versions = await _versions(db, [js.ids[i] for i in which])
    async with db.transaction() as conn:
        await place_jobs(
            conn,
            [
                NewPlacement(
                    job_id=js.ids[i],
                    version=versions[js.ids[i]][1],
                    cluster_id=js.own if where[i] else js.other,
                    epoch=epochs[i],
                    flavors={"w": None},
                    hints=[],
                    message="placed",
                    data={},
                )
                for i in which
            ],
        )


async def _report(db: Database, js: JobSet, updates: list[StatusUpdate]) -> list[str]:
    async with db.transaction() as conn:
        outcomes = await agents.apply_statuses(conn, js.own, updates, RETRY)
    return [o.kind for o in outcomes]


async def _one_by_one(db: Database, js: JobSet, updates: list[StatusUpdate]) -> list[str]:
    """The updates as reports of one each (in one transaction: the same, with fewer commits)."""
    async with db.transaction() as conn:
        return [(await agents.apply_statuses(conn, js.own, [u], RETRY))[0].kind for u in updates]


async def _build(db: Database, tag: str, plan: dict[str, Any]) -> JobSet:
    """A set of JOBS jobs brought to the states `plan` draws (the same plan, the same set)."""
    tenant, queue = await store_queue(db)
    js = JobSet(await _cluster(db, f"own-{tag}"), f"own-{tag}", await _cluster(db, f"x-{tag}"), [])
    async with db.transaction() as conn:
        made = await job_store.submit_many(conn, [stored_job(tenant, queue)] * JOBS)
    js.ids = [r[0].id for r in made if not isinstance(r, Exception)]
    await _place(db, js, plan["placed"], plan["own"], plan["epochs"])
    await _report(db, js, js.updates(plan["setup"], plan["epochs"]))
    await _place(db, js, plan["replaced"], plan["own"], plan["epochs2"])
    async with db.transaction() as conn:
        for i in plan["preempting"]:
            await move_job(conn, js.ids[i], "Preempting", reason="Preempted")
    return js


def _draw(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    placed = [i for i in range(JOBS) if rng.random() < 0.9]
    own = {i: rng.random() < 0.9 for i in range(JOBS)}
    epochs = {i: rng.randint(1, 3) for i in placed}
    setup: list[Drawn] = []
    for i in placed:
        if own[i] and (kind := rng.choice(("", "Applied", "wait", "Running", "Succeeded", "U"))):
            state = {"wait": "Applied", "U": "Unschedulable"}.get(kind, kind)
            setup.append((i, state, 0, "queue full" if kind in ("wait", "U") else ""))
    requeued = [i for i, s, _, _ in setup if s == "Unschedulable"]
    replaced = [i for i in requeued if rng.random() < 0.7]
    epochs2 = {**epochs, **{i: epochs[i] + 1 for i in replaced}}
    running = [i for i, s, _, _ in setup if s == "Running"]
    preempting = rng.sample(running, len(running) // 4)
    first: list[Drawn] = []
    for i in range(JOBS):
        for _ in range(rng.choice((1, 1, 1, 2))):  # some jobs twice in one report
            offset = rng.choice((0,) * 8 + (-1, 1))  # stale epochs
            message = rng.choice(("", "", "queue full", "no node fits"))
            first.append((i, rng.choice(REPORTS), offset, message))
    rng.shuffle(first)
    again = [u for u in first if rng.random() < 0.5]  # a re-send of half the report
    again += [(i, rng.choice(REPORTS), 0, "") for i in rng.sample(range(JOBS), 300)]
    return {
        "placed": placed,
        "own": own,
        "epochs": epochs,
        "setup": setup,
        "replaced": replaced,
        "epochs2": epochs2,
        "preempting": preempting,
        "reports": [first, again],
    }


# what of a job's row must come out the same
_COMPARED = (
    *(jobs.c[c] for c in ("id", "state", "reason", "version", "cluster_id", "pending_reasons")),
    jobs.c.placement_failures,
    jobs.c.not_before.is_not(None).label("backing_off"),
    jobs.c.started_at.is_not(None).label("started"),
    jobs.c.finished_at.is_not(None).label("finished"),
)


async def _dump(db: Database, js: JobSet) -> list[str]:
    """Every job's row, placements and events, with this set's cluster names and ids masked."""
    async with db.connection() as conn:
        rows = (await conn.execute(sa.select(*_COMPARED).where(jobs.c.id.in_(js.ids)))).all()
        held = await conn.execute(
            sa.select(placements.c.job_id, placements.c.epoch, placements.c.state)
            .where(placements.c.job_id.in_(js.ids))
            .order_by(placements.c.epoch)
        )
        logged = await conn.execute(
            sa.select(events.c.job_id, events.c.reason, events.c.message, events.c.data)
            .where(events.c.job_id.in_(js.ids))
            .order_by(events.c.id)
        )
        by_job: dict[uuid.UUID, dict[str, Any]] = {
            r.id: {**r._mapping, "placements": [], "events": []} for r in rows
        }
        for p in held:
            by_job[p.job_id]["placements"].append((p.epoch, p.state))
        for e in logged:
            by_job[e.job_id]["events"].append((e.reason, e.message, e.data))
    text = [json.dumps(by_job[i], default=str, sort_keys=True) for i in js.ids]
    masks = {str(js.own): "OWN", str(js.other): "OTHER", js.own_name: "NAME"}
    for n, t in enumerate(text):
        for key, mask in masks.items():
            t = t.replace(key, mask)
        text[n] = t.replace(str(js.ids[n]), "JOB")
    return text


def _model(state: str, failures: int, report: str) -> tuple[str, int]:
    """The state (and failed placements) one fresh update leaves: forward along Placed <
    Dispatched < Running, terminal states never left, the queue reachable from any holder."""
    if state in ("Queued", "Succeeded", "Failed", "Cancelled"):
        return state, failures
    if report in ("Evicted", "Unschedulable"):
        if report == "Unschedulable":
            failures += 1
            if failures >= RETRY.max_failures:
                return "Failed", failures
        return "Queued", failures
    if report == "Failed":
        return "Failed", failures
    if state == "Preempting":
        return state, failures
    order = ("Placed", "Dispatched", "Running", "Succeeded")
    reached = {"Applied": "Dispatched", "Running": "Running", "Succeeded": "Succeeded"}[report]
    return max(state, reached, key=order.index), failures


async def test_a_whole_report_gives_what_its_updates_give_one_by_one(db: Database) -> None:
    seed = 19
    plan = _draw(seed)
    whole = await _build(db, f"w{seed}", plan)
    single = await _build(db, f"s{seed}", plan)
    assert await _dump(db, whole) == await _dump(db, single)  # the same start

    for drawn in plan["reports"]:
        before = await _versions(db, whole.ids)
        async with db.connection() as conn:
            rows = await conn.execute(
                sa.select(
                    jobs.c.id, jobs.c.cluster_id, jobs.c.epoch, jobs.c.placement_failures
                ).where(jobs.c.id.in_(whole.ids))
            )
            held = {r.id: (r.cluster_id, r.epoch, r.placement_failures) for r in rows}
        expected = {i: (before[i][0], held[i][2]) for i in whole.ids}
        fenced = {i: held[i][0] == whole.own for i in whole.ids}
        epochs = {n: held[whole.ids[n]][1] for n in range(JOBS)}
        updates = whole.updates(drawn, epochs)
        with statements_sent(db) as sent:
            outcomes = await _report(db, whole, updates)
        rounds = max(Counter(u.job for u in updates).values())
        # the cluster's name, then per round: lock, release, notify, jobs, events
        assert len(sent) <= 1 + 5 * rounds + 2  # BEGIN and COMMIT are not sent as statements
        assert outcomes == await _one_by_one(db, single, single.updates(drawn, epochs))
        assert await _dump(db, whole) == await _dump(db, single)

        for u, kind in zip(updates, outcomes, strict=True):
            state, failures = expected[u.job]
            if not fenced[u.job] or u.epoch != held[u.job][1]:
                assert kind == "stale"
                continue
            new = _model(state, failures, u.state)
            if new[0] == "Queued":
                fenced[u.job] = False  # requeued: the cluster no longer holds it
            expected[u.job] = new
        after = await _versions(db, whole.ids)
        assert {i: s for i, (s, _) in after.items()} == {i: s for i, (s, _) in expected.items()}
