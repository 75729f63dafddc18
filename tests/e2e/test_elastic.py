"""An elastic job end to end on a real local cluster (issue 15's "done when" for part 1).

The cluster is a real kube-apiserver, kube-scheduler calling `suanpan-extender`,
kube-controller-manager and kwok nodes; the real `suanpan-agent` process runs over it and the
real `suanpan-hub serve` on its own PostgreSQL. What runs is read from the apiserver: the
elastic job grows into the idle accelerators of its node, gives back replicas (the highest
first) when an urgent job arrives instead of being evicted, and grows back once it leaves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

import pytest
import pytest_asyncio

from bench.failover import Api
from deploy.local.clusters import Environment
from deploy.local.kube import wait_for
from federation.wire import annotations as ann
from tests.e2e.conftest import ExtendedClusters
from tests.e2e.hub import ascend_job, hub_over

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

BEIJING = "dc-beijing"  # one node of 8 Ascend 910B3: room for 4 replicas of 2


async def running(env: Environment, job_id: str) -> list[int]:
    """The replica indexes of the job's pods that run: Running and not being deleted."""
    async with env.cluster(BEIJING).client() as client:
        listed = await client.get(f"/api/v1/pods?labelSelector={ann.JOB_LABEL}%3D{job_id}")
    return sorted(
        int(p["metadata"]["labels"][ann.REPLICA_LABEL])
        for p in listed["items"]
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    )


async def has(env: Environment, job_id: str, replicas: list[int]) -> bool:
    return await running(env, job_id) == replicas


async def resizes(api: Api, job_id: str) -> list[dict[str, int]]:
    """The replica counts the hub resized the job to, in order."""
    events = await api.call("GET", f"/v1/jobs/{job_id}/events")
    return [e["data"]["replicas"] for e in events["items"] if e["reason"] == "Resized"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(
    extended_clusters: ExtendedClusters, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Api]:
    """A hub and Beijing's agent over the session's clusters."""
    workdir = tmp_path_factory.mktemp("elastic")
    async with hub_over(extended_clusters.env, [BEIJING], workdir) as calls:
        yield calls


async def test_an_elastic_job_grows_shrinks_for_an_urgent_job_and_grows_back(
    api: Api, extended_clusters: ExtendedClusters
) -> None:
    env = extended_clusters.env
    elastic = await api.call(
        "POST", "/v1/jobs", json=ascend_job("elastic", 2, minReplicas=1, maxReplicas=4)
    )
    job_id = elastic["id"]
    await wait_for("grown into the idle devices", partial(has, env, job_id, [0, 1, 2, 3]), 90)
    epoch = (await api.job(job_id))["epoch"]

    urgent = await api.call("POST", "/v1/jobs", json=ascend_job("urgent", 4, "critical"))
    await wait_for("urgent running", partial(has, env, urgent["id"], [0]), 90)
    # gave back its highest replicas, no more than the urgent job needs (the pods read from
    # the apiserver; the hub's resizes, should a check fail, are in the assertion)
    try:
        await wait_for("two replicas left", partial(has, env, job_id, [0, 1]), 30)
    except TimeoutError:
        assert await running(env, job_id) == [0, 1], await resizes(api, job_id)
    job = await api.job(job_id)
    assert (job["state"], job["epoch"]) == ("Running", epoch), job  # not evicted
    assert job["elastic"] == [{"task": "main", "replicas": 2, "minReplicas": 1, "maxReplicas": 4}]

    await api.cancel(urgent["id"])
    await wait_for("grown back", partial(has, env, job_id, [0, 1, 2, 3]), 90)
    resized = await resizes(api, job_id)
    assert {"main": 2} in resized and {"main": 1} not in resized, resized
    assert resized[-1] == {"main": 4}, resized
    events = await api.call("GET", f"/v1/jobs/{job_id}/events")
    assert not {"Failed", "Evicted", "PodsLost"} & {e["reason"] for e in events["items"]}
    await api.cancel(job_id)
