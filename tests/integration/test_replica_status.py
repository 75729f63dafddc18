"""Per-replica status and the failure policy, through the real hub, agent and PostgreSQL.

The clusters are simulated (their pods fail as their annotations say, with an exit code);
everything above the backend is the production agent, the hub the real app and loop.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from cluster_agents.backends.simulated import SimulatedCluster
from deploy.fleet import Fleet
from deploy.local.kube import wait_for
from deploy.local.pki import write_serving_pki
from federation.store import agents, replicas
from federation.store import jobs as job_store
from federation.store.clusters import ensure_cluster
from federation.store.database import Database
from federation.store.lifecycle import NewPlacement, place_jobs, resize_placement
from federation.store.tables import events, placements, replica_status
from federation.wire import annotations as ann
from federation.wire.agent import Registration, ReplicaFailure, ReplicaStatus, StatusUpdate
from tests.integration.conftest import ADMIN_TOKEN, serving, store_queue, stored_job

pytestmark = pytest.mark.integration


@pytest.fixture
async def fleet(db: Database, tmp_path: Path) -> AsyncIterator[Fleet]:
    async with serving(db, Fleet(db, ADMIN_TOKEN, pki=write_serving_pki(tmp_path / "pki"))) as f:
        yield f


def manifest(annotations: dict[str, str], replicas: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": "oom", "tenant": "acme"},
        "spec": {
            "queue": "default",
            "tasks": [
                {
                    "name": "w",
                    "replicas": replicas,
                    "image": "busybox",
                    "annotations": annotations,
                    "resources": {
                        "cpu": "1",
                        "memory": "1Gi",
                        "accelerators": {"count": 1, "anyOf": [{"flavor": "nvidia/*"}]},
                    },
                }
            ],
            **spec,
        },
    }


async def _until(fleet: Fleet, job_id: str, state: str) -> dict[str, Any]:
    job: dict[str, Any] = {}

    async def there() -> bool:
        job.update(await fleet.call("GET", f"/v1/jobs/{job_id}"))
        return bool(job["state"] == state)

    await wait_for(f"job {state}", there, 60)
    return job


async def _describe(fleet: Fleet, job_id: str) -> str:
    assert fleet.pki is not None
    env = {
        **os.environ,
        "SUANPAN_HUB": fleet.url,
        "SUANPAN_TOKEN": ADMIN_TOKEN,
        "SUANPAN_HUB_CA": str(fleet.pki.ca_cert),
    }
    cli = Path(sys.executable).parent / "suanpan"
    done = await asyncio.create_subprocess_exec(
        str(cli), "describe", "job", job_id, env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await done.communicate()
    assert done.returncode == 0
    return out.decode()


async def test_a_failed_replica_runs_again_in_place_then_fails_the_job(fleet: Fleet) -> None:
    sim = await fleet.add_cluster("bj", "dc-beijing")
    failing = {ann.FAIL_REASON: "OOMKilled", ann.RUN_SECONDS: "1"}
    body = manifest(failing, failurePolicy={"backoffLimit": 1})
    job = await fleet.call("POST", "/v1/jobs", json=body)
    failed = await _until(fleet, job["id"], "Failed")

    assert failed["reason"] == "OOMKilled"
    assert failed["attempts"] == 2  # one placement, each replica run twice
    rows = [
        (r["task"], r["replica"], r["attempt"], r["phase"], r["exitCode"], r["reason"])
        for r in failed["replicas"]
    ]
    assert rows == [("w", i, 2, "Failed", 137, "OOMKilled") for i in (0, 1)]
    for r in failed["replicas"]:
        assert r["pod"].endswith("-a2") and r["node"]
        assert r["lastFailure"]["attempt"] == 1 and r["lastFailure"]["exitCode"] == 137
    kept = sorted(p.name for p in sim.pods() if p.job == job["id"])
    assert len(kept) == 4  # the first attempts are kept for their logs

    told = await fleet.call("GET", f"/v1/jobs/{job['id']}/events")
    reasons = [e["reason"] for e in told["items"]]
    assert reasons.count("ReplicaFailed") == 4  # two replicas, two attempts each
    assert reasons[-1] == "OOMKilled" and reasons.index("ReplicaFailed") < len(reasons) - 1
    first = next(e for e in told["items"] if e["reason"] == "ReplicaFailed")
    assert first["data"]["exitCode"] == 137 and first["data"]["reason"] == "OOMKilled"
    assert first["data"]["attempt"] == 1 and "run again as attempt 2" in first["message"]

    text = await _describe(fleet, job["id"])
    assert "attempts: 2" in text
    assert "TASK  REPLICA  ATTEMPT" in text
    assert any(
        line.split()[-4:] == ["Failed", "137", "OOMKilled", "0"] for line in text.splitlines()
    )
    assert "ReplicaFailed" in text


async def test_a_job_without_retries_fails_at_the_first_failure(fleet: Fleet) -> None:
    await fleet.add_cluster("bj", "dc-beijing")
    failing = {ann.FAIL_REASON: "Error", ann.EXIT_CODE: "3"}
    body = manifest(failing, replicas=1, failurePolicy={"backoffLimit": 0})
    job = await fleet.call("POST", "/v1/jobs", json=body)
    failed = await _until(fleet, job["id"], "Failed")
    (replica,) = failed["replicas"]
    assert (replica["attempt"], replica["exitCode"], replica["reason"]) == (1, 3, "Error")
    assert replica["lastFailure"] is None and failed["attempts"] == 1


async def test_a_lost_node_fails_the_job_when_its_policy_says_so(fleet: Fleet) -> None:
    sim: SimulatedCluster = await fleet.add_cluster("bj", "dc-beijing")
    body = manifest({ann.RUN_SECONDS: "600"}, replicas=1, failurePolicy={"onNodeFailure": "fail"})
    job = await fleet.call("POST", "/v1/jobs", json=body)
    running = await _until(fleet, job["id"], "Running")
    sim.fail_node(running["replicas"][0]["node"])
    failed = await _until(fleet, job["id"], "Failed")
    assert failed["reason"] == "NodeLost"
    assert failed["replicas"][0]["reason"] == "NodeLost"


# --- the store, set-wise -----------------------------------------------------------------


def _status(replica: int, attempt: int, phase: str, **kw: Any) -> ReplicaStatus:
    return ReplicaStatus(
        task="w",
        replica=replica,
        attempt=attempt,
        pod=f"p-{replica}-a{attempt}",
        node="n1",
        phase=phase,  # type: ignore[arg-type]
        **kw,
    )


async def _placed(db: Database, count: int) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """Cluster c1, registered, and `count` jobs placed on it at epoch 1."""
    tenant, queue = await store_queue(db)
    async with db.transaction() as conn:
        cluster = await ensure_cluster(conn, "c1")
        await agents.register(conn, cluster, Registration(cluster="c1"))
        made = [await job_store.submit(conn, stored_job(tenant, queue)) for _ in range(count)]
        ids = [job.id for job, _ in made]
        await place_jobs(
            conn,
            [NewPlacement(i, 1, cluster, 1, {"w": None}, [], "placed", {}) for i in ids],
        )
    return cluster, ids


async def test_a_report_stores_every_replica_in_a_constant_number_of_statements(
    db: Database,
) -> None:
    cluster, ids = await _placed(db, 30)
    oom = {"exit_code": 137, "reason": "OOMKilled", "message": "container w: OOMKilled"}
    first = [
        StatusUpdate(
            job=i,
            epoch=1,
            state="Running",
            replicas=[_status(0, 1, "Running"), _status(1, 1, "Running")],
        )
        for i in ids
    ]
    again = [
        StatusUpdate(
            job=i,
            epoch=1,
            state="Running",
            replicas=[
                _status(
                    0,
                    2,
                    "Pending",
                    last=ReplicaFailure(attempt=1, pod="p-0-a1", exit_code=137, reason="OOMKilled"),
                ),
                _status(1, 1, "Failed", **oom),
            ],
        )
        for i in ids
    ]
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    async with db.transaction() as conn:
        await agents.apply_statuses(conn, cluster, first)
    async with db.transaction() as conn:
        sa.event.listen(conn.sync_connection, "before_cursor_execute", count)
        await agents.apply_statuses(conn, cluster, again)
        await agents.apply_statuses(conn, cluster, again)  # a re-send says nothing new
    assert len(statements) <= 2 * 8, statements  # per report, whatever its number of jobs

    async with db.connection() as conn:
        stored, attempts = await replicas.of_job(conn, ids[0], 1)
        told = (
            await conn.execute(
                sa.select(events.c.reason, events.c.data).where(
                    events.c.job_id == ids[0], events.c.reason == "ReplicaFailed"
                )
            )
        ).all()
        rows = await conn.scalar(sa.select(sa.func.count()).select_from(replica_status))
    assert rows == 60
    assert [(r.replica, r.attempt, r.phase, r.exit_code, r.reason) for r in stored] == [
        (0, 2, "Pending", None, ""),
        (1, 1, "Failed", 137, "OOMKilled"),
    ]
    assert attempts == 2
    assert sorted((d["replica"], d["attempt"], d["exitCode"]) for _, d in told) == [
        (0, 1, 137),
        (1, 1, 137),
    ]


async def test_a_late_report_of_an_earlier_attempt_is_ignored(db: Database) -> None:
    _, (job_id,) = await _placed(db, 1)
    async with db.transaction() as conn:
        await replicas.record(conn, [replicas.Reported(job_id, 1, [_status(0, 2, "Running")])])
        late = await replicas.record(
            conn, [replicas.Reported(job_id, 1, [_status(0, 1, "Failed", reason="Error")])]
        )
        stored, _ = await replicas.of_job(conn, job_id, 1)
    assert late == [] and stored[0].attempt == 2 and stored[0].phase == "Running"


async def test_a_replica_a_resize_removed_is_neither_stored_nor_told_failed(db: Database) -> None:
    _, (job_id,) = await _placed(db, 1)
    async with db.transaction() as conn:
        await replicas.record(
            conn, [replicas.Reported(job_id, 1, [_status(r, 1, "Running") for r in range(3)])]
        )
        revision = await conn.scalar(
            sa.select(placements.c.revision).where(placements.c.job_id == job_id)
        )
        assert await resize_placement(conn, job_id, 1, revision, {"w": 2}, [])
        crossed = [_status(0, 1, "Running"), _status(2, 1, "Failed", reason="Error")]
        told = await replicas.record(conn, [replicas.Reported(job_id, 1, crossed)])
        stored, _ = await replicas.of_job(conn, job_id, 1)
    assert told == [] and [r.replica for r in stored] == [0, 1]


async def test_a_new_reason_is_told_once_and_an_image_pull_retry_is_one_reason(
    db: Database,
) -> None:
    _, (job_id,) = await _placed(db, 1)
    async with db.transaction() as conn:
        told = []
        for reason in ("Unschedulable", "ErrImagePull", "ImagePullBackOff", "ErrImagePull"):
            pending = _status(0, 1, "Pending", reason=reason, message="pulling x")
            told += await replicas.record(conn, [replicas.Reported(job_id, 1, [pending])])
        running = _status(0, 1, "Running", reason="NodeLost", message="node n1 is not Ready")
        told += await replicas.record(conn, [replicas.Reported(job_id, 1, [running])])
    assert [(e.reason, e.data["reason"]) for e in told] == [
        ("ReplicaReason", "ErrImagePull"),  # the scheduler's waits are the job's own reason
        ("ReplicaReason", "NodeLost"),
    ]
    assert told[0].message == "w-0 attempt 1 (pod p-0-a1): ErrImagePull: pulling x"
