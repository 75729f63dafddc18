"""A preemptor whose freed devices a pod outside the hub takes, on a real local cluster.

Two low jobs fill Beijing's Ascend node (4 NPUs each); a pod the hub knows nothing of waits for
NPUs under the default scheduler. An urgent job evicts one low job; kube-scheduler then binds
the outside pod to the NPUs the victim freed before the hub can place the urgent job there, so
the urgent job's hold stays short. The hub waits rather than evicting more while the victim
may still be leaving; once the victim's grace period and `holdMarginSeconds` are past, it
drops the hold, evicts the other low job and runs the urgent job. Without the bound it waited
for ever.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from bench.failover import Api
from deploy.local.kube import wait_for
from tests.e2e.conftest import ExtendedClusters
from tests.e2e.hub import ascend_job, hub_over

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

BEIJING = "dc-beijing"
NODE = "bj-ascend-0"  # 8 Ascend 910B3
RESOURCE = "huawei.com/Ascend910B3"
MARGIN_S = 3
OUTSIDE = "outside-the-hub"
QUICK = {"checkpoint": {"gracePeriodSeconds": 0}}  # pods stop at once when evicted


def outside_pod() -> dict[str, Any]:
    """A pod for the default scheduler asking for 4 NPUs of the node."""
    requests = {"cpu": "1", "memory": "1Gi", RESOURCE: "4"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": OUTSIDE},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
        },
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(
    extended_clusters: ExtendedClusters, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Api]:
    """A hub whose holds outlive the victims' grace by `MARGIN_S`, and Beijing's agent."""
    workdir = tmp_path_factory.mktemp("preemption-hold")
    scheduling = f"preemption: {{holdMarginSeconds: {MARGIN_S}}}"
    async with hub_over(extended_clusters.env, [BEIJING], workdir, scheduling) as calls:
        yield calls


async def _state(api: Api, job_id: str) -> str:
    return str((await api.job(job_id))["state"])


async def test_an_urgent_job_whose_freed_devices_an_outside_pod_took_evicts_another_victim(
    api: Api, extended_clusters: ExtendedClusters
) -> None:
    cluster = extended_clusters.env.cluster(BEIJING)
    lows = [
        await api.call("POST", "/v1/jobs", json=ascend_job(f"low-{i}", 4, "low", QUICK))
        for i in (1, 2)
    ]
    for low in lows:
        await wait_for(f"{low['id']} running", lambda j=low["id"]: _is(api, j, "Running"), 90)
    async with cluster.client() as client:
        await client.post("/api/v1/namespaces/default/pods", outside_pod())
        try:
            urgent = await api.call(
                "POST", "/v1/jobs", json=ascend_job("urgent", 4, "critical", QUICK)
            )

            async def outside_bound() -> bool:
                pod = await client.get(f"/api/v1/namespaces/default/pods/{OUTSIDE}")
                return bool(pod["spec"].get("nodeName"))

            await wait_for("the outside pod took the freed NPUs", outside_bound, 60)
            await wait_for(
                "urgent running", lambda: _is(api, urgent["id"], "Running"), 60 + MARGIN_S
            )
            states = sorted([await _state(api, low["id"]) for low in lows])
            events = await api.call("GET", f"/v1/jobs/{urgent['id']}/events")
            preempted = [e for e in events["items"] if e["reason"] == "Preempting"]
            assert all(s != "Running" for s in states), states  # both were evicted
            assert len(preempted) == 2, events["items"]
        finally:
            await client.delete(f"/api/v1/namespaces/default/pods/{OUTSIDE}")
    for job in (*lows, urgent):
        await api.cancel(job["id"])


async def _is(api: Api, job_id: str, state: str) -> bool:
    return await _state(api, job_id) == state
