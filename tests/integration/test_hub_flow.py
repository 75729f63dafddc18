"""The hub's whole control flow over HTTP and PostgreSQL, with the agent played by the test.

Registration and inventory, a scheduling cycle placing a gang, the agent's long-poll, status
up to Succeeded, epoch fencing, preemption with the victim requeued and re-run, explain, and
fail-fast rejection. The agent side here speaks the real wire protocol; the real agent and
clusters are exercised by the agent and end-to-end suites.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from deploy.local.kube import wait_for
from federation.catalog import load_catalog
from federation.controllers import leader, snapshot, writer
from federation.controllers.leader import LOCK_KEY, Leadership, LostLeadership
from federation.controllers.pacing import Pace, Window
from federation.controllers.scheduler import SchedulerLoop
from federation.hubconfig import HubConfig
from federation.scheduling import parking
from federation.scheduling.framework import SchedulerConfig
from federation.scheduling.state import State
from federation.store.database import DATABASE_DOWN
from federation.store.listener import JOBS, Listener
from federation.store.tables import jobs
from tests.integration.conftest import Hub

pytestmark = pytest.mark.integration

FLAVOR = "huawei/Ascend910B3"


def _node(name: str, devices: int = 8, used: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "labels": {"node.kubernetes.io/npu.chip.name": "910B3"},
        "cpuMilli": 192_000,
        "memoryMib": 1_048_576,
        "devices": [
            {"flavor": FLAVOR, "index": i, "memoryMib": 65536, "usedMilli": 1000 if i < used else 0}
            for i in range(devices)
        ],
    }


def _job(
    name: str, replicas: int, count: int, priority: str = "normal", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "queue": "default",
            "priorityClass": priority,
            "tasks": [
                {
                    "name": "trainer",
                    "replicas": replicas,
                    "images": {"huawei": "mindspore:2.3"},
                    "resources": {
                        "cpu": "8",
                        "memory": "32Gi",
                        "accelerators": {"count": count, "anyOf": [{"flavor": FLAVOR}]},
                    },
                }
            ],
            **spec,
        },
    }


async def _agent(hub: Hub, cluster: str, nodes: list[dict[str, Any]]) -> str:
    _, issued = await hub.call(
        "POST", "/v1/tokens", json={"name": f"{cluster}-agent", "role": "agent", "cluster": cluster}
    )
    token = issued["token"]
    status, reply = await hub.call(
        "POST", "/v1/agent/register", token, json={"cluster": cluster, "region": "beijing"}
    )
    assert status == 200 and reply["inventoryGeneration"] == 0
    status, ack = await hub.call(
        "POST", "/v1/agent/inventory", token, json={"generation": 1, "full": True, "nodes": nodes}
    )
    assert status == 200 and ack == {"generation": 1, "resync": False}
    return str(token)


async def _loop(hub: Hub, config: HubConfig | None = None) -> SchedulerLoop:
    loop = SchedulerLoop(hub.db, load_catalog(), config=config)
    assert await loop.leadership.acquire()
    return loop


async def _status(
    hub: Hub, token: str, job: dict[str, Any], state: str, epoch: int = 1, **extra: str
) -> dict[str, Any]:
    status, ack = await hub.call(
        "POST",
        "/v1/agent/status",
        token,
        json={"updates": [{"job": job["id"], "epoch": epoch, "state": state, **extra}]},
    )
    assert status == 200
    return dict(ack)


async def test_a_gang_is_placed_dispatched_run_and_released(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    agent = await _agent(hub, "east", [_node("n1"), _node("n2")])
    _, job = await hub.call("POST", "/v1/jobs", user, json=_job("train", replicas=2, count=8))
    loop = await _loop(hub)
    report = await loop.cycle()
    assert report.written.placed == 1
    _, job = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert (job["state"], job["cluster"], job["epoch"]) == ("Placed", "east", 1)

    status, batch = await hub.call("GET", "/v1/agent/assignments", agent, params={"after": "0"})
    assert status == 200 and len(batch["items"]) == 1
    item = batch["items"][0]
    assert item["state"] == "Active" and item["epoch"] == 1
    (trainer,) = item["tasks"]
    assert trainer["task"]["name"] == "trainer" and trainer["device"]["flavor"] == FLAVOR
    assert sorted(h["node"] for h in item["hints"]) == ["n1", "n2"]

    assert await _status(hub, agent, job, "Applied") == {"applied": 1, "duplicate": 0, "stale": 0}
    assert await _status(hub, agent, job, "Applied") == {"applied": 0, "duplicate": 1, "stale": 0}
    assert await _status(hub, agent, job, "Running") == {"applied": 1, "duplicate": 0, "stale": 0}
    assert await _status(hub, agent, job, "Succeeded", epoch=7) == {
        "applied": 0,
        "duplicate": 0,
        "stale": 1,
    }
    assert await _status(hub, agent, job, "Succeeded") == {"applied": 1, "duplicate": 0, "stale": 0}
    _, job = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert job["state"] == "Succeeded"
    _, later = await hub.call(
        "GET", "/v1/agent/assignments", agent, params={"after": str(batch["revision"])}
    )
    assert [i["state"] for i in later["items"]] == ["Released"]
    _, events = await hub.call("GET", f"/v1/jobs/{job['id']}/events", user)
    assert [e["reason"] for e in events["items"]] == [
        "Submitted",
        "Placed",
        "Applied",
        "Running",
        "Succeeded",
    ]


@pytest.mark.parametrize("seen", ["Placed", "Dispatched"])
async def test_a_success_whose_earlier_reports_were_missed_still_finishes_the_job(
    hub: Hub, seen: str
) -> None:
    """The chaos suite's seed 3 (`python -m bench.chaos --seed 3 --faults 20`): a short job's
    Running report was lost while its agent was cut off, the agent then sent only Succeeded
    (the placement's latest state), and the job stayed Dispatched for ever."""
    user = await hub.tenant_with_queue("acme")
    agent = await _agent(hub, "east", [_node("n1")])
    _, job = await hub.call("POST", "/v1/jobs", user, json=_job("short", replicas=1, count=8))
    await (await _loop(hub)).cycle()
    if seen == "Dispatched":
        await _status(hub, agent, job, "Applied")
    assert await _status(hub, agent, job, "Succeeded") == {"applied": 1, "duplicate": 0, "stale": 0}
    _, job = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert job["state"] == "Succeeded" and job["startedAt"] is not None
    _, events = await hub.call("GET", f"/v1/jobs/{job['id']}/events", user)
    assert [e["reason"] for e in events["items"]] == [
        "Submitted",
        "Placed",
        "Applied",
        "Running",
        "Succeeded",
    ]
    assert await _status(hub, agent, job, "Succeeded") == {"applied": 0, "duplicate": 1, "stale": 0}


async def test_a_waiting_job_is_explained_per_cluster(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    await _agent(hub, "east", [_node("n1", used=6)])
    await _agent(hub, "west", [_node("w1", used=4)])
    _, waits = await hub.call("POST", "/v1/jobs", user, json=_job("waits", replicas=1, count=8))
    loop = await _loop(hub)
    await loop.cycle()
    _, why = await hub.call("GET", f"/v1/jobs/{waits['id']}/explain", user)
    assert why["state"] == "Queued"
    assert {c["cluster"] for c in why["clusters"]} == {"east", "west"}
    assert all(c["code"] == "unschedulable" and c["reason"] for c in why["clusters"])


async def test_a_reasons_numbers_are_written_now_and_then_and_a_new_reason_at_once(
    hub: Hub,
) -> None:
    """Counts-only changes of a waiting job's reason wait `REASONS_REFRESH_S`; a reason of a
    new kind (another cluster) is written in the cycle that finds it."""
    clock = [0.0]
    user = await hub.tenant_with_queue("acme")
    east = await _agent(hub, "east", [_node("n1", used=6)])
    _, waits = await hub.call("POST", "/v1/jobs", user, json=_job("waits", replicas=1, count=8))
    loop = await _loop(hub)
    loop._reasons = writer.ReasonsWritten(clock=lambda: clock[0])

    async def explained() -> list[tuple[str, str]]:
        _, why = await hub.call("GET", f"/v1/jobs/{waits['id']}/explain", user)
        return [(c["cluster"], c["reason"]) for c in why["clusters"]]

    async def inventory(generation: int, used: int) -> None:
        body = {"generation": generation, "full": True, "nodes": [_node("n1", used=used)]}
        assert (await hub.call("POST", "/v1/agent/inventory", east, json=body))[0] == 200

    assert (await loop.cycle()).written.pending_updated == 1
    first = await explained()
    await inventory(2, used=5)  # 3 devices free instead of 2: the same reason, other numbers
    assert (await loop.cycle()).written.pending_updated == 0
    assert await explained() == first
    clock[0] += writer.REASONS_REFRESH_S
    await inventory(3, used=4)
    assert (await loop.cycle()).written.pending_updated == 1
    refreshed = await explained()
    assert refreshed != first and [c for c, _ in refreshed] == ["east"]
    await _agent(hub, "west", [_node("w1", used=4)])
    assert (await loop.cycle()).written.pending_updated == 1
    assert [c for c, _ in await explained()] == ["east", "west"]


async def test_a_full_fleets_queue_is_parked_until_a_job_ends(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job behind a full fleet is parked: the next cycle skips it (its explain unchanged) and
    the one after the running job succeeded places it."""
    skipped: list[set[str]] = []  # what each cycle given parked jobs skipped
    skippable = parking.Parked.skippable

    def spy(self: parking.Parked, state: State, config: SchedulerConfig) -> Mapping[str, Any]:
        found = skippable(self, state, config)
        skipped.append(set(found))
        return found

    monkeypatch.setattr(parking.Parked, "skippable", spy)
    user = await hub.tenant_with_queue("acme")
    agent = await _agent(hub, "east", [_node("n1")])
    _, first = await hub.call("POST", "/v1/jobs", user, json=_job("first", replicas=1, count=8))
    _, waits = await hub.call("POST", "/v1/jobs", user, json=_job("waits", replicas=1, count=4))
    loop = await _loop(hub)
    placed = await loop.cycle()
    assert (placed.written.placed, placed.parked) == (1, 1)
    _, before = await hub.call("GET", f"/v1/jobs/{waits['id']}/explain", user)
    again = await loop.cycle()
    assert (again.pending, again.written.placed, again.parked) == (1, 0, 1)
    assert skipped == [{waits["id"]}]
    _, after = await hub.call("GET", f"/v1/jobs/{waits['id']}/explain", user)
    assert (
        after["clusters"] == before["clusters"] and after["clusters"][0]["code"] == "unschedulable"
    )
    await _status(hub, agent, first, "Succeeded")
    freed = await loop.cycle()
    assert (freed.written.placed, freed.parked) == (1, 0)
    assert skipped == [{waits["id"]}, set()]  # room came back: tried again
    _, waits = await hub.call("GET", f"/v1/jobs/{waits['id']}", user)
    assert waits["state"] == "Placed"


async def test_a_job_no_cluster_could_ever_run_is_refused_at_submission(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    await _agent(hub, "east", [_node("n1")])
    status, problem = await hub.call(
        "POST", "/v1/jobs", user, json=_job("never", replicas=1, count=32)
    )
    assert status == 422 and problem["type"].endswith("/unschedulable")
    assert set(problem["clusters"]) == {"east"} and "32" in problem["clusters"]["east"]
    _, page = await hub.call("GET", "/v1/jobs", user)
    assert page["items"] == []


async def test_a_job_the_fleet_can_no_longer_run_fails_in_the_loop(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    agent = await _agent(hub, "east", [_node("big", 16)])
    _, job = await hub.call("POST", "/v1/jobs", user, json=_job("wide", replicas=1, count=16))
    assert job["state"] == "Queued"
    await hub.call(
        "POST",
        "/v1/agent/inventory",
        agent,
        json={"generation": 2, "full": True, "nodes": [_node("small", 8)]},
    )
    await (await _loop(hub)).cycle()
    _, job = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert job["state"] == "Failed" and job["reason"] == "Unschedulable"


async def test_an_unknown_flavor_is_refused_with_its_field(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    manifest = _job("typo", replicas=1, count=1)
    manifest["spec"]["tasks"][0]["resources"]["accelerators"]["anyOf"] = [
        {"flavor": "huawei/Ascend910B3"},
        {"flavor": "nvidia/H1000"},
    ]
    status, problem = await hub.call("POST", "/v1/jobs", user, json=manifest)
    assert status == 422
    assert problem["errors"][0]["path"] == "spec.tasks[0].resources.accelerators.anyOf[1].flavor"


async def test_high_priority_preempts_and_the_victim_is_requeued_and_rerun(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    agent = await _agent(hub, "east", [_node("n1")])
    _, low = await hub.call(
        "POST", "/v1/jobs", user, json=_job("low", replicas=1, count=8, priority="low")
    )
    loop = await _loop(hub)
    await loop.cycle()
    await _status(hub, agent, low, "Running")
    # the cluster now reports the devices as used by the low job's pod
    full = _node("n1", used=8)
    await hub.call(
        "POST", "/v1/agent/inventory", agent, json={"generation": 2, "full": True, "nodes": [full]}
    )

    _, high = await hub.call(
        "POST", "/v1/jobs", user, json=_job("high", replicas=1, count=8, priority="critical")
    )
    report = await loop.cycle()
    assert report.written.preempted == 1
    _, low = await hub.call("GET", f"/v1/jobs/{low['id']}", user)
    assert low["state"] == "Preempting"
    _, batch = await hub.call("GET", "/v1/agent/assignments", agent, params={"after": "0"})
    assert [(i["name"], i["state"]) for i in batch["items"]] == [("low", "Released")]

    # the agent deletes the victim's pods and reports it; the cluster frees the devices
    await _status(hub, agent, low, "Evicted")
    await hub.call(
        "POST",
        "/v1/agent/inventory",
        agent,
        json={"generation": 3, "full": False, "nodes": [_node("n1")]},
    )
    _, low = await hub.call("GET", f"/v1/jobs/{low['id']}", user)
    assert (low["state"], low["cluster"]) == ("Queued", None)
    await loop.cycle()
    _, high = await hub.call("GET", f"/v1/jobs/{high['id']}", user)
    assert (high["state"], high["cluster"]) == ("Placed", "east")
    _, events = await hub.call("GET", f"/v1/jobs/{low['id']}/events", user)
    preempted = [e for e in events["items"] if e["reason"] == "Preempted"]
    assert preempted and preempted[0]["data"]["preemptor"] == high["id"]

    # the high job finishes; the victim runs again, with a new epoch
    await _status(hub, agent, high, "Running")
    await _status(hub, agent, high, "Succeeded")
    await loop.cycle()
    _, low = await hub.call("GET", f"/v1/jobs/{low['id']}", user)
    assert (low["state"], low["epoch"]) == ("Placed", 2)


@pytest.mark.parametrize("margin_s", [0.0, 60.0])
async def test_a_preemptor_holds_what_its_victim_freed_only_until_the_victim_had_to_leave(
    hub: Hub, margin_s: float
) -> None:
    """The victim names no grace period to stop in (`gracePeriodSeconds: 0`) and leaves, but
    its node still reports the devices used (something outside the hub took them). With a
    hold margin of 0 the preemptor's hold is released at the next cycle and it evicts the
    other low job; with the default margin it waits, evicting nothing more."""
    user = await hub.tenant_with_queue("acme")
    agent = await _agent(hub, "east", [_node("n1"), _node("n2")])
    lows = []
    for name in ("low-1", "low-2"):
        manifest = _job(name, replicas=1, count=8, priority="low")
        manifest["spec"]["checkpoint"] = {"gracePeriodSeconds": 0}
        _, low = await hub.call("POST", "/v1/jobs", user, json=manifest)
        lows.append(low)
    loop = await _loop(hub, HubConfig(hold_margin_s=margin_s))
    await loop.cycle()
    for low in lows:
        await _status(hub, agent, low, "Running")
    full = [_node("n1", used=8), _node("n2", used=8)]
    await hub.call(
        "POST", "/v1/agent/inventory", agent, json={"generation": 2, "full": True, "nodes": full}
    )
    _, high = await hub.call(
        "POST", "/v1/jobs", user, json=_job("high", replicas=1, count=8, priority="critical")
    )
    assert (await loop.cycle()).written.preempted == 1
    states = {}
    for low in lows:
        _, got = await hub.call("GET", f"/v1/jobs/{low['id']}", user)
        states[low["id"]] = got["state"]
    (victim,) = [job_id for job_id, state in states.items() if state == "Preempting"]
    await _status(hub, agent, {"id": victim}, "Evicted")
    report = await loop.cycle()
    assert report.written.preempted == (1 if margin_s == 0 else 0)
    _, high = await hub.call("GET", f"/v1/jobs/{high['id']}", user)
    assert high["state"] == "Queued"


async def test_inventory_gap_asks_for_a_full_resync(hub: Hub) -> None:
    agent = await _agent(hub, "east", [_node("n1")])
    status, ack = await hub.call(
        "POST", "/v1/agent/inventory", agent, json={"generation": 5, "full": False, "nodes": []}
    )
    assert status == 200 and ack == {"generation": 1, "resync": True}
    _, cluster = await hub.call("GET", "/v1/clusters/east")
    assert cluster["nodes"] == 1 and cluster["flavors"][0]["total"] == 8
    await hub.call(
        "POST",
        "/v1/agent/inventory",
        agent,
        json={"generation": 2, "full": False, "removed": ["n1"], "nodes": [_node("n2", 16)]},
    )
    _, cluster = await hub.call("GET", "/v1/clusters/east")
    assert cluster["nodes"] == 1 and cluster["flavors"][0]["total"] == 16


async def test_a_lost_cluster_requeues_its_jobs(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    agent = await _agent(hub, "east", [_node("n1")])
    _, job = await hub.call("POST", "/v1/jobs", user, json=_job("train", replicas=1, count=4))
    loop = await _loop(hub)
    await loop.cycle()
    await _status(hub, agent, job, "Running")
    async with hub.db.transaction() as conn:
        await conn.exec_driver_sql(
            "UPDATE clusters SET last_heartbeat = now() - interval '10 minutes'"
        )
    loop.leading_since = datetime.now(UTC) - timedelta(minutes=20)
    changes = await loop.check_health()  # silent for 10 minutes: NotReady, then Offline at once
    assert [c for c in changes if "job" not in c] == [
        "east NotReady (agent lease not renewed)",
        "east Offline",
    ]
    assert any("ClusterLost" in c for c in changes)
    assert await loop.check_health() == []
    _, job = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert job["state"] == "Queued"
    # the old epoch's reports are now stale
    assert await _status(hub, agent, job, "Succeeded") == {"applied": 0, "duplicate": 0, "stale": 1}


async def test_a_silent_cluster_is_not_ready_until_its_agent_calls_again(hub: Hub) -> None:
    agent = await _agent(hub, "east", [_node("n1")])
    loop = await _loop(hub)
    async with hub.db.transaction() as conn:
        await conn.exec_driver_sql("UPDATE clusters SET last_heartbeat = now() - interval '6 s'")
    loop.leading_since = datetime.now(UTC) - timedelta(minutes=1)
    assert await loop.check_health() == ["east NotReady (agent lease not renewed)"]
    _, cluster = await hub.call("GET", "/v1/clusters/east")
    assert cluster["state"] == "NotReady"
    await hub.call("GET", "/v1/agent/assignments", agent)
    _, cluster = await hub.call("GET", "/v1/clusters/east")
    assert cluster["state"] == "Ready"


async def test_a_deposed_leader_cannot_write(hub: Hub) -> None:
    """Its lock connection cut, another replica leading: its next cycle's write transaction is
    refused (and rolled back), so a deposed leader never writes after losing leadership."""
    user = await hub.tenant_with_queue("acme")
    await _agent(hub, "east", [_node("n1")])
    old = await _loop(hub)
    async with hub.db.transaction() as conn:
        await conn.execute(
            sa.text("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE objid = :k"),
            {"k": LOCK_KEY},
        )
    new = await _loop(hub)
    _, job = await hub.call("POST", "/v1/jobs", user, json=_job("train", replicas=1, count=8))
    with pytest.raises(LostLeadership):
        await old.cycle()
    with pytest.raises(LostLeadership):
        await old.check_health()
    _, seen = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert seen["state"] == "Queued"
    assert (await new.cycle()).written.placed == 1


async def test_a_frozen_leader_loses_its_lock_and_its_open_write(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frozen leader (SIGSTOP, a paused VM) keeps its connections open: while it pings its
    lock connection it keeps leading; once it stops (frozen), the lock connection times out,
    and so does a write transaction it froze in, so another replica takes over instead of
    waiting behind the fence forever; the frozen one's transaction is gone when it resumes."""
    # 2 s: a ping (every 0.4 s) answered later than this loses the lock, which a loaded CI
    # machine's PostgreSQL once did at 1 s (the test failed, and a lock it left, the next two)
    monkeypatch.setattr(leader, "FROZEN_AFTER_S", 2.0)
    old = await _loop(hub)
    new = Leadership(hub.db.url)
    alive = asyncio.create_task(old.leadership.keep_alive())
    try:
        await asyncio.sleep(3.0)
        assert not await new.acquire()  # pinged: still the leader's
        alive.cancel()  # frozen from here on

        async def takes_over() -> bool:  # the fence waits for the frozen write's session to end
            return await asyncio.wait_for(new.acquire(), 10)

        # the server ended the frozen session: asyncpg reports it as a lost connection, or
        # (seen against Debian's PostgreSQL 15) as a protocol state it cannot leave; either
        # way the write never commits
        with pytest.raises((*DATABASE_DOWN, sa.exc.InternalError)):
            async with hub.db.transaction() as conn:
                await old.leadership.fence(conn)  # it froze inside this write
                await wait_for("another replica leading", takes_over, 5)
                await conn.execute(sa.text("SELECT 1"))  # resumed: its transaction was ended
    finally:  # neither lock outlives the test, whatever failed
        alive.cancel()
        await new.release()
        await old.leadership.release()


async def test_a_busy_leader_keeps_its_lock(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader whose event loop is blocked longer than the frozen-leader timeout (a snapshot
    read of seconds under CPU contention) is busy, not frozen: its lock connection is pinged
    from a thread of its own, so it keeps leading and its next write goes through."""
    monkeypatch.setattr(leader, "FROZEN_AFTER_S", 1.0)
    old = await _loop(hub)
    alive = asyncio.create_task(old.leadership.keep_alive())
    await asyncio.sleep(0.2)
    time.sleep(3.0)  # noqa: ASYNC251 (the point: the loop blocked three timeouts long)
    new = Leadership(hub.db.url)
    assert not await new.acquire()
    async with hub.db.transaction() as conn:
        await old.leadership.fence(conn)  # still the leader: no LostLeadership
    alive.cancel()
    await new.release()
    await old.leadership.release()


async def test_a_new_leader_gives_every_agent_a_full_lease(hub: Hub) -> None:
    await _agent(hub, "east", [_node("n1")])
    loop = await _loop(hub)
    async with hub.db.transaction() as conn:
        await conn.exec_driver_sql(
            "UPDATE clusters SET last_heartbeat = now() - interval '10 minutes'"
        )
    assert await loop.check_health() == []  # it has just started leading
    _, cluster = await hub.call("GET", "/v1/clusters/east")
    assert cluster["state"] == "Ready"


async def test_a_gang_that_could_not_start_is_replanned_on_another_cluster(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    east = await _agent(hub, "east", [_node("e1", used=4)])  # fuller: packing prefers it
    await _agent(hub, "west", [_node("w1")])
    _, job = await hub.call("POST", "/v1/jobs", user, json=_job("gang", replicas=1, count=4))
    loop = await _loop(hub)
    await loop.cycle()
    _, job = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert job["cluster"] == "east"
    # east's scheduler could not bind the gang in time: the agent says so
    ack = await _status(hub, east, job, "Unschedulable")
    assert ack["applied"] == 1
    _, job = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert (job["state"], job["cluster"]) == ("Queued", None)
    assert "re-placed in 30 s, attempt 2 of 5" in job["reason"]
    assert (await loop.cycle()).written.placed == 0  # backing off
    await _end_backoff(hub, job["id"])
    await loop.cycle()
    _, job = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert (job["state"], job["cluster"], job["epoch"]) == ("Placed", "west", 2)


async def _end_backoff(hub: Hub, job_id: str) -> None:
    async with hub.db.transaction() as conn:
        await conn.execute(
            sa.update(jobs).where(jobs.c.id == uuid.UUID(job_id)).values(not_before=None)
        )


async def test_the_clusters_reason_is_explained_and_re_placement_stops_at_its_cap(hub: Hub) -> None:
    """Regression: a job that could never bind was re-placed every 120 s forever, and explain
    showed nothing for a dispatched job that was stuck."""
    user = await hub.tenant_with_queue("acme")
    east = await _agent(hub, "east", [_node("e1")])
    _, job = await hub.call("POST", "/v1/jobs", user, json=_job("stuck", replicas=1, count=4))
    loop = await _loop(hub)
    why = "0/3 nodes are available: 3 huawei/Ascend910B3: devices unhealthy."
    for epoch in range(1, 6):
        await loop.cycle()
        ack = await _status(hub, east, job, "Applied", epoch, reason="Unschedulable", message=why)
        assert ack["applied"] == 1
        repeat = await _status(
            hub, east, job, "Applied", epoch, reason="Unschedulable", message=why
        )
        assert repeat["duplicate"] == 1  # the same reason is written once
        _, explained = await hub.call("GET", f"/v1/jobs/{job['id']}/explain", user)
        assert explained["state"] == "Dispatched" and why in explained["summary"]
        assert explained["clusters"] == [{"cluster": "east", "code": "cluster", "reason": why}]
        await _status(hub, east, job, "Unschedulable", epoch, message=why)
        await _end_backoff(hub, job["id"])
    _, job = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert (job["state"], job["reason"]) == (
        "Failed",
        "the cluster could not start the job 5 times (last: east: " + why + ")",
    )
    _, events = await hub.call("GET", f"/v1/jobs/{job['id']}/events", user)
    reasons = [e["reason"] for e in events["items"]]
    assert reasons.count("ClusterWaiting") == 5 and reasons[-1] == "NeverBound"


async def test_queue_usage_is_the_ledger_the_scheduler_charges(hub: Hub) -> None:
    """Regression: the API's usage ignored per-flavor device counts and compute units."""
    user = await hub.tenant_with_queue("acme")
    await _agent(hub, "east", [_node("e1")])
    manifest = _job("percount", replicas=2, count=8)
    manifest["spec"]["tasks"][0]["resources"]["accelerators"]["anyOf"][0]["count"] = 2
    status, _ = await hub.call("POST", "/v1/jobs", user, json=manifest)
    assert status == 201
    loop = await _loop(hub)
    assert (await loop.cycle()).written.placed == 1
    _, queue = await hub.call("GET", "/v1/tenants/acme/queues/default", user)
    speed = load_catalog().get(FLAVOR).speed  # type: ignore[union-attr]
    assert queue["usage"][FLAVOR] == 2 * 2 * 1000  # the flavor's own count, not 8
    assert queue["usage"]["compute"] == round(2 * 2 * 1000 * speed)
    assert (queue["usage"]["cpu"], queue["usage"]["memory"]) == (16000, 65536)


async def test_a_queues_fair_share_is_its_weighted_dominant_share_of_its_cohort(hub: Hub) -> None:
    """The standing the scheduler orders queues by, over every queue of the cohort (also
    those the caller cannot see)."""
    quota = {FLAVOR: {"nominal": 8000}}
    users = {}
    for tenant, weight in (("acme", 2.0), ("globex", 1.0)):
        users[tenant] = await hub.tenant_with_queue(tenant)
        status, _ = await hub.call(
            "PATCH",
            f"/v1/tenants/{tenant}/queues/default",
            json={"cohort": "pool", "weight": weight, "quota": quota},
        )
        assert status == 200
    await _agent(hub, "east", [_node("e1")])
    status, _ = await hub.call("POST", "/v1/jobs", users["acme"], json=_job("a", 1, count=4))
    assert status == 201
    assert (await (await _loop(hub)).cycle()).written.placed == 1
    _, mine = await hub.call("GET", "/v1/tenants/acme/queues/default", users["acme"])
    assert mine["usage"][FLAVOR] == 4000
    assert mine["fairShare"] == 4000 / 16000 / 2.0  # of the cohort's nominal, per weight
    _, theirs = await hub.call("GET", "/v1/queues", users["globex"])
    assert [(q["tenant"], q["fairShare"]) for q in theirs["items"]] == [("globex", 0.0)]


async def test_every_queued_job_is_considered_within_a_bounded_number_of_cycles(
    hub: Hub,
) -> None:
    """No silent cap: past the head, a window rotates over the rest of the queue."""
    user = await hub.tenant_with_queue("acme")
    await _agent(hub, "east", [_node("n1", used=6)])
    ids = []
    for n in range(12):
        _, job = await hub.call("POST", "/v1/jobs", user, json=_job(f"w{n}", replicas=1, count=4))
        ids.append(job["id"])
    loop = await _loop(hub)
    loop.pace = Pace(1.0, smallest=5, largest=5)  # a head of 2, 3 rotating
    assert loop.pace.window == Window(2, 3)
    for _ in range(-(-(12 - 2) // 3)):  # ceil((queued - head) / rotating) cycles
        await loop.cycle()
    for job_id in ids:
        _, why = await hub.call("GET", f"/v1/jobs/{job_id}/explain", user)
        assert why["clusters"] and "next scheduling cycle" not in why["summary"], job_id


async def _reads_agree(hub: Hub, cache: snapshot.CompiledCache, now: float) -> snapshot.Read:
    """A read through `cache` (what the loop keeps across cycles) models the same placements
    and pending jobs as one with an empty cache."""
    async with hub.db.transaction() as conn:
        warm = await snapshot.read(conn, load_catalog(), now=now, cache=cache)
        cold = await snapshot.read(conn, load_catalog(), now=now)
    assert warm.snapshot.placements == cold.snapshot.placements
    assert warm.pending == cold.pending
    return warm


async def test_run_limits_and_checkpoints_reach_the_core_and_the_agent(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    other = await hub.tenant_with_queue("other")
    agent = await _agent(hub, "east", [_node("n1"), _node("n2")])
    checkpoint = {"intervalSeconds": 600, "gracePeriodSeconds": 90}
    _, first = await hub.call(
        "POST",
        "/v1/jobs",
        user,
        json=_job("first", 1, 8, maxRuntimeSeconds=3600, checkpoint=checkpoint),
    )
    loop = await _loop(hub)
    await loop.cycle()
    _, batch = await hub.call("GET", "/v1/agent/assignments", agent, params={"after": "0"})
    assert [i["gracePeriodSeconds"] for i in batch["items"]] == [90]
    await _status(hub, agent, first, "Running")
    used = [_node(n["node"], used=8) for n in batch["items"][0]["hints"]]
    free = [_node(n) for n in ("n1", "n2") if n not in {u["name"] for u in used}]
    await hub.call(
        "POST",
        "/v1/agent/inventory",
        agent,
        json={"generation": 2, "full": True, "nodes": used + free},
    )

    cache = snapshot.CompiledCache()  # warm from here on: run times still come from the rows
    (running,) = (await _reads_agree(hub, cache, time.time())).snapshot.placements
    assert running.job.since_checkpoint_s is None
    status, reported = await hub.call("POST", f"/v1/jobs/{first['id']}/checkpoint", user)
    assert status == 200 and reported["checkpointedAt"] is not None
    assert (await hub.call("POST", f"/v1/jobs/{first['id']}/checkpoint", other))[0] == 404
    later = time.time() + 120
    (running,) = (await _reads_agree(hub, cache, later)).snapshot.placements
    job = running.job
    assert (job.max_runtime_s, job.checkpoint_interval_s) == (3600, 600)
    assert job.since_checkpoint_s is not None and 120 <= job.since_checkpoint_s < 180
    assert 120 <= job.runtime_s < 180

    # a gang of both nodes waits for "first" to end; a job without a limit may not backfill
    _, gang = await hub.call("POST", "/v1/jobs", user, json=_job("gang", 2, 8))
    _, late = await hub.call("POST", "/v1/jobs", user, json=_job("late", 1, 8))
    await loop.cycle()
    _, gang = await hub.call("GET", f"/v1/jobs/{gang['id']}", user)
    assert gang["state"] == "Queued" and "reserved on east, expected start" in gang["reason"]
    _, late = await hub.call("GET", f"/v1/jobs/{late['id']}", user)
    assert late["state"] == "Queued" and f"capacity reserved for job {gang['id']}" in late["reason"]

    await hub.call("POST", f"/v1/jobs/{first['id']}/cancel", user)
    status, problem = await hub.call("POST", f"/v1/jobs/{first['id']}/checkpoint", user)
    assert status == 409, problem


async def test_a_backlog_longer_than_the_window_is_placed_without_waiting_for_submissions(
    hub: Hub,
) -> None:
    """Found by the fleet benchmark: after a cycle that placed jobs, the loop waited for the
    next submission (or `intervalSeconds`) although more of the queue fitted; a burst that had
    stopped arriving then took a cycle and an interval per window."""
    user = await hub.tenant_with_queue("acme")
    await _agent(hub, "east", [_node("n1"), _node("n2")])
    for n in range(12):
        await hub.call("POST", "/v1/jobs", user, json=_job(f"b{n}", replicas=1, count=1))
    listener = Listener(hub.db.url)
    await listener.start(JOBS)
    loop = SchedulerLoop(
        hub.db, load_catalog(), config=HubConfig(interval_s=30.0), listener=listener
    )
    loop.pace = Pace(1.0, smallest=4, largest=4)  # three windows of the 12 queued
    stop = asyncio.Event()
    running = asyncio.create_task(loop.run(stop))
    try:

        async def all_placed() -> bool:
            async with hub.db.connection() as conn:
                queued = await conn.scalar(
                    sa.select(sa.func.count()).select_from(jobs).where(jobs.c.state == "Queued")
                )
            return queued == 0

        await wait_for("the backlog placed", all_placed, 10)  # one interval alone is 30 s
    finally:
        stop.set()
        await running
        await listener.close()
