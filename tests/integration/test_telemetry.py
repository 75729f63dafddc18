"""Live device telemetry over the real hub and PostgreSQL, agents over simulated clusters:
readings reach the hub and are served, a share avoids a busy device, a fatal error takes its
device out of service (events on the cluster and on the job holding it, capacity down, nothing
placed there) until it clears."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cluster_agents.backends.simulated import Reading, SimulatedCluster
from deploy.fleet import Fleet
from deploy.local.kube import wait_for
from federation.store.database import Database
from tests.integration.conftest import ADMIN_TOKEN, serving

pytestmark = pytest.mark.integration

H100 = "nvidia/H100-80GB"
XID79 = "DCGM_FI_DEV_XID_ERRORS=79"


@pytest.fixture
async def fleet(db: Database, tmp_path: Path) -> AsyncIterator[Fleet]:
    async with serving(db, Fleet(db, ADMIN_TOKEN, telemetry_interval_s=0.3)) as f:
        yield f


def manifest(name: str, count: int = 1, fraction: float | None = None) -> dict[str, Any]:
    accelerators: dict[str, Any] = {"count": count, "anyOf": [{"flavor": H100}]}
    if fraction is not None:
        accelerators["fraction"] = fraction
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": name, "tenant": "acme"},
        "spec": {
            "queue": "default",
            "tasks": [
                {
                    "name": "main",
                    "image": "busybox",
                    "annotations": {"suanpan.io/run-seconds": "100000"},
                    "resources": {"cpu": "1", "memory": "1Gi", "accelerators": accelerators},
                }
            ],
        },
    }


async def _device(fleet: Fleet, node: str, index: int) -> dict[str, Any]:
    """The device as GET /v1/telemetry shows it ({} before the inventory has it)."""
    found = await fleet.call("GET", "/v1/telemetry", params={"cluster": "bj", "vendor": "nvidia"})
    return next((d for d in found["items"] if d["node"] == node and d["index"] == index), {})


async def _h100(fleet: Fleet) -> dict[str, Any]:
    cluster = await fleet.call("GET", "/v1/clusters/bj")
    return next(f for f in cluster["flavors"] if f["flavor"] == H100)


async def _state(fleet: Fleet, job: str) -> str:
    return str((await fleet.call("GET", f"/v1/jobs/{job}"))["state"])


async def test_telemetry_steers_shares_and_faults_take_devices_out(fleet: Fleet) -> None:
    sim = await fleet.add_cluster("bj", "dc-beijing")
    assert isinstance(sim, SimulatedCluster)
    for node in ("bj-h100-0", "bj-h100-1"):  # device 0: idle by allocation, busy in fact
        sim.readings[(node, 0)] = Reading(utilization=97.0)

    async def reported() -> bool:
        d = await _device(fleet, "bj-h100-0", 0)
        return d.get("utilization") == 97.0 and (await _h100(fleet))["reporting"] == 16

    await wait_for("the busy device's reading at the hub", reported, 30)
    every = (await fleet.call("GET", "/v1/telemetry", params={"cluster": "bj"}))["items"]
    assert {d["vendor"] for d in every if d["utilization"] is not None} >= {
        "nvidia",
        "huawei",
        "cambricon",
        "hygon",
    }
    flavor = await _h100(fleet)
    assert flavor["utilization"] == round(2 * 97.0 / 16, 1)
    status, problem = await fleet.text("/v1/telemetry", vendor="acme")
    assert status == 422 and "query.vendor" in problem and "nvidia" in problem

    # a share lands on an idle device, not on device 0 (where packing alone would put it)
    share = await fleet.call("POST", "/v1/jobs", json=manifest("share", fraction=0.5))

    async def share_running() -> bool:
        return await _state(fleet, share["id"]) == "Running"

    await wait_for("the share Running", share_running, 30)
    (pod,) = [p for p in sim.pods() if p.job == share["id"]]
    assert pod.devices == (1,), pod

    # a fatal error under the share, and one on a free device of the other node
    sim.readings[(pod.node, 1)] = Reading(fault=XID79)
    sim.readings[("bj-h100-1", 3)] = Reading(fault=XID79)

    async def out_of_service() -> bool:
        d = await _device(fleet, "bj-h100-1", 3)
        healthy = (await _h100(fleet))["healthy"]
        return d.get("healthy") is False and d["fault"] == XID79 and healthy == 14

    await wait_for("two devices out of service", out_of_service, 30)
    events = await fleet.call("GET", f"/v1/jobs/{share['id']}/events")
    failed = [e for e in events["items"] if e["reason"] == "DeviceFailed"]
    assert len(failed) == 1 and XID79 in failed[0]["message"]

    # eight whole GPUs fit on no node now: each has one in fatal error
    whole = await fleet.call("POST", "/v1/jobs", json=manifest("whole", count=8))
    await wait_for(
        "the 8-GPU job considered",
        lambda: _reason(fleet, whole["id"]),
        30,
    )
    assert await _state(fleet, whole["id"]) == "Queued"

    sim.readings[("bj-h100-1", 3)] = Reading()  # reset: the error clears

    async def whole_running() -> bool:
        return await _state(fleet, whole["id"]) == "Running"

    await wait_for("the 8-GPU job Running once the device recovered", whole_running, 30)
    (big,) = [p for p in sim.pods() if p.job == whole["id"]]
    assert big.node == "bj-h100-1"


async def _reason(fleet: Fleet, job: str) -> bool:
    found = await fleet.call("GET", f"/v1/jobs/{job}")
    return bool(found.get("reason"))
