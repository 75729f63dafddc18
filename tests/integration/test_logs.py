"""`GET /v1/jobs/{id}/logs` end to end over a simulated cluster: the agent takes the request on
its own poll and uploads the log, the hub relays it over NOTIFY to the waiting client."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from deploy.local.kube import wait_for
from tests.integration.test_agent_flow import JobFleet, manifest
from tests.integration.test_agent_flow import fleet as fleet  # the fixture, re-exported

pytestmark = pytest.mark.integration


async def _running(fleet: JobFleet, run_s: int = 600) -> str:
    await fleet.add_cluster("bj", "dc-beijing")
    job = await fleet.call("POST", "/v1/jobs", json=manifest("log", "huawei/*", 1, run_s=run_s))

    async def running() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Running"

    await wait_for("job Running", running, 60)
    return str(job["id"])


def _session(fleet: JobFleet) -> aiohttp.ClientSession:
    """An admin session that trusts the fleet's per-run CA."""
    return aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {fleet.admin_token}"},
        connector=aiohttp.TCPConnector(ssl=fleet.client_tls()),
    )


async def _get(fleet: JobFleet, job_id: str, **params: str) -> tuple[int, str]:
    async with (
        _session(fleet) as s,
        s.get(f"{fleet.url}/v1/jobs/{job_id}/logs", params=params) as r,
    ):
        return r.status, await r.text()


async def test_logs_return_the_replicas_lines(fleet: JobFleet) -> None:
    job_id = await _running(fleet)
    await asyncio.sleep(2)
    status, text = await _get(fleet, job_id, task="main", replica="0")
    assert status == 200, text
    assert text.startswith("[main-0] step 0: running on ")
    status, tail = await _get(fleet, job_id, tail="1", limitBytes="10")
    assert status == 200 and len(tail.encode()) == 10


async def test_follow_streams_until_the_client_leaves(fleet: JobFleet) -> None:
    job_id = await _running(fleet)
    async with (
        _session(fleet) as s,
        s.get(f"{fleet.url}/v1/jobs/{job_id}/logs", params={"follow": "true"}) as r,
    ):
        assert r.status == 200
        seen = b""
        async with asyncio.timeout(30):
            while seen.count(b"\n") < 3:
                seen += await r.content.readany()
    assert b"[main-0] step" in seen


async def test_no_pod_or_no_such_replica_is_a_clear_4xx(fleet: JobFleet) -> None:
    job = await fleet.call("POST", "/v1/jobs", json=manifest("wait", "huawei/*", 1))
    status, text = await _get(fleet, job["id"])
    assert status == 409 and "never had a pod" in text
    status, text = await _get(fleet, job["id"], replica="3")
    assert status == 422 and "query.replica" in text
    status, _ = await _get(fleet, job["id"], follow="yes")
    assert status == 422


async def test_a_finished_jobs_pod_is_kept_and_its_log_read(fleet: JobFleet) -> None:
    sim = await fleet.add_cluster("bj", "dc-beijing")
    job = await fleet.call("POST", "/v1/jobs", json=manifest("short", "huawei/*", 1, run_s=3))

    async def done() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Succeeded"

    await wait_for("job Succeeded", done, 60)
    await asyncio.sleep(3)  # several reconciliations after the placement was released
    assert [p.phase for p in sim.pods() if p.job == job["id"]] == ["Succeeded"]
    status, text = await _get(fleet, job["id"])
    assert status == 200 and "[main-0] step 0" in text
    await asyncio.sleep(1)
    assert await _get(fleet, job["id"]) == (200, text)  # an ended pod writes no more


async def test_a_jobs_tasks_are_offered_in_its_order(fleet: JobFleet) -> None:
    """The default task is the job's first, as the manifest orders them (not by name)."""
    body = manifest("two", "huawei/*", 1)
    first = body["spec"]["tasks"][0]
    body["spec"]["tasks"] = [{**first, "name": "zeta"}, {**first, "name": "alpha"}]
    job = await fleet.call("POST", "/v1/jobs", json=body)
    status, text = await _get(fleet, job["id"], task="nope")
    assert status == 422 and "zeta, alpha" in text
