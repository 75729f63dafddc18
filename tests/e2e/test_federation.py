"""The whole system on two real local clusters: hub, agents (Kubernetes backend), extenders.

Each cluster is a real kube-apiserver + kube-scheduler (calling `suanpan-extender` for
filter/prioritize/bind) + kube-controller-manager + kwok nodes of several vendors. The hub
(API + scheduling loop) runs in this process on an embedded PostgreSQL; each cluster's agent
runs the production code over `KubernetesBackend`. Jobs go in over REST only.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from cluster_agents.backends.kubernetes import KubernetesBackend
from deploy.fleet import Fleet, local_fleet
from deploy.local.clusters import ClusterState, Environment
from deploy.local.extender import ExtenderProcess
from deploy.local.kube import wait_for
from federation.hubconfig import HubConfig, RetryPolicy
from federation.k8s_names import tenant_namespace
from federation.wire import annotations as ann
from tests.e2e.conftest import ExtendedClusters

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ADMIN = "sp_e2e_admin"
NS = "suanpan-fed"  # the agents' prefix
ACME = tenant_namespace(NS, "acme")  # where the member token's pods run
SUANPAN = Path(sys.executable).with_name("suanpan")
BEIJING, SHANGHAI = "dc-beijing", "dc-shanghai"


EXTENDERS: dict[str, ExtenderProcess] = {}
# short gang timeout and back-off, so a placement the cluster cannot bind is seen failing
CONFIG = HubConfig(interval_s=0.2, gang_timeout_s=15, retry=RetryPolicy(1, 1, 2))


@dataclass
class World:
    """The running system: clusters, hub fleet, and a member token."""

    env: Environment
    fleet: Fleet
    token: str

    def cluster(self, name: str) -> ClusterState:
        return next(c for c in self.env.clusters if c.name == name)

    async def submit(self, manifest: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self.fleet.call(
            "POST", "/v1/jobs", self.token, json=manifest
        )
        assert "id" in created, created
        return created

    async def job(self, job_id: str) -> dict[str, Any]:
        return dict(await self.fleet.call("GET", f"/v1/jobs/{job_id}", self.token))

    async def until(self, job_id: str, *states: str, timeout_s: float = 60) -> dict[str, Any]:
        async def reached() -> bool:
            return (await self.job(job_id))["state"] in states

        await wait_for(f"job {job_id} in {states}", reached, timeout_s)
        return await self.job(job_id)

    async def pods(self, cluster: str, job_id: str) -> list[dict[str, Any]]:
        async with self.cluster(cluster).client() as client:
            listed = await client.get(
                f"/api/v1/namespaces/{ACME}/pods?labelSelector={ann.JOB_LABEL}%3D{job_id}"
            )
        return list(listed["items"])


def task(
    name: str, flavor: str | None, count: int = 1, replicas: int = 1, run_s: int = 3
) -> dict[str, Any]:
    resources: dict[str, Any] = {"cpu": "2", "memory": "4Gi"}
    if flavor:
        resources["accelerators"] = {"count": count, "anyOf": [{"flavor": flavor}]}
    return {
        "name": name,
        "replicas": replicas,
        "image": "registry.local/e2e:1",
        "annotations": {ann.RUN_SECONDS: str(run_s)},
        "resources": resources,
    }


def manifest(name: str, *tasks: dict[str, Any], priority: str = "normal") -> dict[str, Any]:
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"queue": "default", "priorityClass": priority, "tasks": list(tasks)},
    }


@pytest.fixture(scope="module")
def environment(extended_clusters: ExtendedClusters) -> Environment:
    """Two clusters whose schedulers call our extender, one extender process per cluster."""
    EXTENDERS.update(extended_clusters.extenders)
    return extended_clusters.env


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(environment: Environment) -> AsyncIterator[World]:
    async with local_fleet(ADMIN, config=CONFIG) as fleet:
        yield await _populate(fleet, environment)


async def _populate(fleet: Fleet, environment: Environment) -> World:
    """A tenant, a member token and both clusters attached with their agents."""
    await fleet.call("POST", "/v1/tenants", json={"name": "acme"})
    await fleet.call("POST", "/v1/tenants/acme/queues", json={"name": "default"})
    member = await fleet.call(
        "POST", "/v1/tokens", json={"name": "m", "role": "member", "tenant": "acme"}
    )
    for cs in environment.clusters:
        backend = KubernetesBackend(cs.kubeconfig, NS, fleet.catalog)
        await fleet.attach(cs.name, backend, namespace=NS)

    async def registered() -> bool:
        clusters = (await fleet.call("GET", "/v1/clusters"))["items"]
        return all(c["state"] == "Ready" and c["nodes"] for c in clusters) and len(clusters) == 2

    await wait_for("both clusters registered with their nodes", registered, 60)
    return World(environment, fleet, member["token"])


async def test_the_hub_inventory_matches_the_clusters_including_foreign_pods(world: World) -> None:
    for cs in world.env.clusters:
        async with cs.client() as client:
            kube_nodes = {
                n["metadata"]["name"] for n in (await client.get("/api/v1/nodes"))["items"]
            }
        hub = await world.fleet.call("GET", f"/v1/clusters/{cs.name}")
        assert hub["nodes"] == len(kube_nodes), cs.name
    beijing = await world.fleet.call("GET", f"/v1/clusters/{BEIJING}")
    assert {f["flavor"]: f["total"] for f in beijing["flavors"]} == {
        "nvidia/H100-80GB": 16,
        "huawei/Ascend910B3": 8,
        "cambricon/MLU370-X8": 8,
        "hygon/K100-AI": 8,
    }
    # a pod created outside Suanpan holding 2 Ascend cards counts as used at the hub
    foreign = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "foreign-ascend", "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "bj-ascend-0"},
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {
                        "requests": {"huawei.com/Ascend910B3": "2"},
                        "limits": {"huawei.com/Ascend910B3": "2"},
                    },
                }
            ],
        },
    }
    async with world.cluster(BEIJING).client() as client:
        await client.post("/api/v1/namespaces/default/pods", foreign)

    async def counted() -> bool:
        c = await world.fleet.call("GET", f"/v1/clusters/{BEIJING}")
        ascend = next(f for f in c["flavors"] if f["flavor"] == "huawei/Ascend910B3")
        return bool(ascend["allocatedMilli"] == 2000)

    try:
        await wait_for("the foreign pod's 2 Ascend cards counted at the hub", counted, 30)
    finally:
        async with world.cluster(BEIJING).client() as client:
            await client.delete(
                "/api/v1/namespaces/default/pods/foreign-ascend?gracePeriodSeconds=0"
            )


async def test_a_node_added_or_removed_shows_up_at_the_hub(world: World) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "fed-xpu-extra",
            "labels": {"kubernetes.io/hostname": "fed-xpu-extra", "xpu": "on"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "kunlunxin.com/xpu": "8"},
            "allocatable": {
                "cpu": "64",
                "memory": "512Gi",
                "pods": "110",
                "kunlunxin.com/xpu": "8",
            },
        },
    }
    before = (await world.fleet.call("GET", f"/v1/clusters/{SHANGHAI}"))["nodes"]

    async def nodes_now(expected: int) -> bool:
        return bool(
            (await world.fleet.call("GET", f"/v1/clusters/{SHANGHAI}"))["nodes"] == expected
        )

    async with world.cluster(SHANGHAI).client() as client:
        await client.post("/api/v1/nodes", node)
    await wait_for("the new node at the hub", lambda: nodes_now(before + 1), 20)
    async with world.cluster(SHANGHAI).client() as client:
        await client.delete("/api/v1/nodes/fed-xpu-extra")
    await wait_for("the removed node gone from the hub", lambda: nodes_now(before), 20)


async def test_a_job_runs_to_success_on_the_cluster_with_its_flavor(world: World) -> None:
    job = await world.submit(manifest("xpu-train", task("w", "kunlunxin/*", count=4, replicas=2)))
    running = await world.until(job["id"], "Running", "Succeeded")
    assert running["cluster"] == SHANGHAI  # the only cluster with Kunlunxin P800
    pods = await world.pods(SHANGHAI, job["id"])
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["schedulerName"] == ann.SCHEDULER_NAME
        devices = pod["metadata"]["annotations"][ann.DEVICES].split(",")
        assert len(devices) == 4  # exact device ids chosen by the extender at bind
    used = [
        (p["spec"]["nodeName"], d)
        for p in pods
        for d in p["metadata"]["annotations"][ann.DEVICES].split(",")
    ]
    assert len(set(used)) == len(used)  # no device given twice
    await world.until(job["id"], "Succeeded")


async def test_a_heterogeneous_two_role_job_runs_in_one_cluster(world: World) -> None:
    job = await world.submit(
        manifest(
            "rlhf",
            task("preprocess", None, replicas=2),
            task("policy", "huawei/Ascend910B3", count=8),
        )
    )
    done = await world.until(job["id"], "Succeeded")
    events = (await world.fleet.call("GET", f"/v1/jobs/{job['id']}/events", world.token))["items"]
    placed = next(e for e in events if e["reason"] == "Placed")
    assert placed["data"]["flavors"] == {"preprocess": None, "policy": "huawei/Ascend910B3"}
    assert done["cluster"] in (BEIJING, SHANGHAI)


async def test_cancel_deletes_the_pods(world: World) -> None:
    job = await world.submit(manifest("long", task("w", "cambricon/*", count=4, run_s=100_000)))
    running = await world.until(job["id"], "Running")
    assert await world.pods(running["cluster"], job["id"])
    await world.fleet.call("POST", f"/v1/jobs/{job['id']}/cancel", world.token)

    async def gone() -> bool:
        pods = await world.pods(running["cluster"], job["id"])
        return not [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    await wait_for("pods of the cancelled job deleted", gone, 60)


async def test_an_urgent_job_preempts_and_the_victim_is_requeued_and_rerun(world: World) -> None:
    low = await world.submit(
        manifest(
            "filler",
            task("w", "nvidia/H100*", count=8, replicas=2, run_s=100_000),
            priority="best-effort",
        )
    )
    low = await world.until(low["id"], "Running")
    assert low["cluster"] == BEIJING  # the only cluster with H100
    urgent = await world.submit(
        manifest("urgent", task("w", "nvidia/H100*", count=8, run_s=5), priority="critical")
    )
    await world.until(urgent["id"], "Running", "Succeeded", timeout_s=90)
    victim_events = (await world.fleet.call("GET", f"/v1/jobs/{low['id']}/events", world.token))[
        "items"
    ]
    reasons = [e["reason"] for e in victim_events]
    assert "Preempted" in reasons
    epoch_one = [
        p
        for p in await world.pods(BEIJING, low["id"])
        if p["metadata"]["labels"][ann.EPOCH_LABEL] == "1"
    ]
    assert not [p for p in epoch_one if not p["metadata"].get("deletionTimestamp")]
    await world.until(urgent["id"], "Succeeded", timeout_s=90)
    rerun = await world.until(low["id"], "Running", timeout_s=90)
    assert rerun["epoch"] == 2
    await world.fleet.call("POST", f"/v1/jobs/{low['id']}/cancel", world.token)


async def test_a_job_the_cluster_cannot_bind_is_explained_and_fails_after_its_cap(
    world: World,
) -> None:
    """With Shanghai's extender down, its scheduler cannot place the pods: explain shows the
    cluster's own reason, the job is re-placed with back-off, and fails after two tries."""
    EXTENDERS[SHANGHAI].stop()
    try:
        unbindable = manifest("unbindable", task("w", "huawei/Ascend910B3", count=2))
        unbindable["spec"]["placement"] = {"clusters": [SHANGHAI]}
        job = await world.submit(unbindable)

        async def explained() -> bool:
            why = await world.fleet.call("GET", f"/v1/jobs/{job['id']}/explain", world.token)
            return any(
                c["cluster"] == SHANGHAI and "filter" in c["reason"] for c in why["clusters"]
            )

        await wait_for("the cluster's reason in explain", explained, 30)
        failed = await world.until(job["id"], "Failed", timeout_s=90)
        assert failed["reason"].startswith("the cluster could not start the job 2 times")
        events = await world.fleet.call("GET", f"/v1/jobs/{job['id']}/events", world.token)
        placed = [e for e in events["items"] if e["reason"] == "Placed"]
        assert len(placed) == 2  # re-placed once after the first failure, then no more

        async def cleaned() -> bool:
            return not await world.pods(SHANGHAI, job["id"])

        await wait_for("the failed job's pods deleted", cleaned, 30)
    finally:
        EXTENDERS[SHANGHAI].start()


async def test_a_templated_ascend_gang_mounts_its_data_and_finds_its_peers(world: World) -> None:
    """Done-when of issue 10: the tenant's namespace created by the agent; ConfigMap, Secret and
    a statically bound PVC mounted, a secret in env; both pods bound through the extender, in
    the tenant's namespace only; the headless Service's EndpointSlice lists both; each pod's
    env has its rank, the world size, the master's address and Ascend's runtime variables; the
    HCCL rank table completed with both pods; `suanpan logs` returns what the pod wrote and
    `--follow` streams it; another tenant cannot read those logs."""
    probe = task("probe", None, run_s=1)
    first = manifest("first", probe)
    first["spec"]["placement"] = {"clusters": [BEIJING]}
    await world.until((await world.submit(first))["id"], "Succeeded")
    ns, pv = f"/api/v1/namespaces/{ACME}", f"fed-data-{ACME}"
    async with world.cluster(BEIJING).client() as client:
        labels = (await client.get(ns))["metadata"]["labels"]
        assert (labels[ann.MANAGED_LABEL], labels[ann.TENANT_LABEL]) == ("true", "acme")
        await client.post(f"{ns}/configmaps", {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
        await client.post(f"{ns}/secrets", {"metadata": {"name": "hf"}, "stringData": {"t": "s"}})
        await client.post(
            "/api/v1/persistentvolumes",
            {
                "metadata": {"name": pv},
                "spec": {
                    "capacity": {"storage": "10Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "nfs": {"server": "10.0.0.1", "path": "/datasets"},
                },
            },
        )
        await client.post(
            f"{ns}/persistentvolumeclaims",
            {
                "metadata": {"name": "datasets"},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "volumeName": pv,
                    "resources": {"requests": {"storage": "10Gi"}},
                },
            },
        )

        async def bound() -> bool:
            claim = await client.get(f"{ns}/persistentvolumeclaims/datasets")
            return bool(claim.get("status", {}).get("phase") == "Bound")

        await wait_for("the claim bound to its volume", bound, 30)
    container = {
        "name": "trainer",
        "command": ["python", "train.py"],
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}],
        "volumeMounts": [
            {"name": "cfg", "mountPath": "/cfg"},
            {"name": "hf", "mountPath": "/hf"},
            {"name": "data", "mountPath": "/data"},
        ],
    }
    trainer = {
        **task("trainer", "huawei/Ascend910B3", count=2, replicas=2, run_s=600),
        "image": None,
        "annotations": None,
        "images": {"huawei": "mindspore:2.3"},
        "template": {
            "metadata": {"annotations": {ann.RUN_SECONDS: "600"}},
            "spec": {
                "containers": [container],
                "volumes": [
                    {"name": "cfg", "configMap": {"name": "cfg"}},
                    {"name": "hf", "secret": {"secretName": "hf"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}},
                ],
            },
        },
    }
    trainer = {k: v for k, v in trainer.items() if v is not None}
    body = manifest("tmpl", trainer)
    body["spec"]["placement"] = {"clusters": [BEIJING]}
    job = await world.submit(body)
    await world.until(job["id"], "Running", timeout_s=60)
    pods = sorted(await world.pods(BEIJING, job["id"]), key=lambda p: p["metadata"]["name"])
    assert [p["status"]["phase"] for p in pods] == ["Running", "Running"]
    assert all(ann.DEVICES in p["metadata"]["annotations"] for p in pods)  # the extender bound
    service = f"sp-{job['id']}-e1"
    for replica, pod in enumerate(pods):
        spec = pod["spec"]
        assert (spec["hostname"], spec["subdomain"]) == (f"tmpl-trainer-{replica}", service)
        assert {v["name"] for v in spec["volumes"]} >= {"cfg", "hf", "data"}
        (main,) = spec["containers"]
        env = {e["name"]: e.get("value") for e in main["env"]}
        assert env["RANK"] == str(replica) and env["WORLD_SIZE"] == "2"
        assert env["LOCAL_WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == f"tmpl-trainer-0.{service}"
        assert main["image"] == "mindspore:2.3"
        secret = next(e for e in main["env"] if e["name"] == "HF_TOKEN")
        assert secret["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "t"}}
        assert (env["SUANPAN_COLLECTIVE"], env["SUANPAN_DIST_BACKEND"]) == ("HCCL", "hccl")
        assert env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"
        assert env["RANK_TABLE_FILE"] == "/user/serverid/devindex/config/hccl.json"
    async with world.cluster(BEIJING).client() as client:
        everywhere = await client.get(f"/api/v1/pods?labelSelector={ann.JOB_LABEL}%3D{job['id']}")
    assert {p["metadata"]["namespace"] for p in everywhere["items"]} == {ACME}
    await _rank_table_completed(world, job["id"], pods)
    await _logs_of_the_pod_stream_to_their_tenant_only(world, job["id"])

    async with world.cluster(BEIJING).client() as client:

        async def listed_both() -> bool:
            slices = await client.get(
                f"/apis/discovery.k8s.io/v1/namespaces/{ACME}/endpointslices"
                f"?labelSelector=kubernetes.io%2Fservice-name%3D{service}"
            )
            names = {
                e["targetRef"]["name"]
                for s in slices["items"]
                for e in s.get("endpoints") or []
                if e.get("targetRef")
            }
            return names == {p["metadata"]["name"] for p in pods}

        await wait_for("the EndpointSlice listing both pods", listed_both, 30)
    await world.fleet.call("POST", f"/v1/jobs/{job['id']}/cancel", world.token)


async def _rank_table_completed(world: World, job_id: str, pods: list[dict[str, Any]]) -> None:
    """The gang's HCCL rank table lists both pods, with their IPs and bound devices."""
    path = f"/api/v1/namespaces/{ACME}/configmaps/sp-{job_id}-e1-rank-table"
    table: dict[str, Any] = {}
    async with world.cluster(BEIJING).client() as client:

        async def completed() -> bool:
            table.update(json.loads((await client.get(path))["data"]["hccl.json"]))
            return bool(table["status"] == "completed")

        await wait_for("the rank table completed", completed, 30)
    servers = table["server_list"]
    assert [s["pod_name"] for s in servers] == [p["metadata"]["name"] for p in pods]
    for server, pod in zip(servers, pods, strict=True):
        live = await world.pods(BEIJING, job_id)
        ip = next(p["status"]["podIP"] for p in live if p["metadata"]["name"] == server["pod_name"])
        assert server["container_ip"] == ip
        bound = pod["metadata"]["annotations"][ann.DEVICES].split(",")
        assert [d["device_id"] for d in server["device"]] == bound
    ranks = [d["rank_id"] for s in servers for d in s["device"]]
    assert ranks == ["0", "1", "2", "3"]


def _cli(world: World, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of `suanpan <args>` against the fleet, as the member."""
    assert world.fleet.pki is not None
    env = {
        **os.environ,
        "SUANPAN_HUB": world.fleet.url,
        "SUANPAN_TOKEN": world.token,
        "SUANPAN_HUB_CA": str(world.fleet.pki.ca_cert),
    }
    return [str(SUANPAN), *args], env


def _cri(text: str) -> str:
    """A line of the CRI log format kwok serves."""
    return f"{datetime.now(UTC).isoformat().replace('+00:00', 'Z')} stdout F {text}\n"


async def _logs_of_the_pod_stream_to_their_tenant_only(world: World, job_id: str) -> None:
    log = world.cluster(BEIJING).pod_log
    written = f"epoch 1 loss 0.5 {job_id}"
    with log.open("a") as f:
        f.write(_cri(written))
    argv, env = _cli(world, "logs", job_id, "--replica", "1")
    done = await asyncio.create_subprocess_exec(*argv, env=env, stdout=PIPE, stderr=PIPE)
    out, err = await asyncio.wait_for(done.communicate(), 60)
    assert done.returncode == 0, err
    assert written in out.decode()

    argv, env = _cli(world, "logs", job_id, "--follow", "--tail", "1")
    follow = await asyncio.create_subprocess_exec(*argv, env=env, stdout=PIPE, stderr=PIPE)
    assert follow.stdout is not None
    try:
        first = await asyncio.wait_for(follow.stdout.readline(), 60)
        assert written in first.decode()
        later = f"epoch 2 loss 0.4 {job_id}"
        with log.open("a") as f:
            f.write(_cri(later))
        streamed = await asyncio.wait_for(follow.stdout.readline(), 60)
        assert later in streamed.decode()  # appended after the stream began
    finally:
        follow.kill()
        await follow.wait()

    await world.fleet.call("POST", "/v1/tenants", json={"name": "rival"})
    rival = await world.fleet.call(
        "POST", "/v1/tokens", json={"name": "r", "role": "member", "tenant": "rival"}
    )
    denied = await world.fleet.call("GET", f"/v1/jobs/{job_id}/logs", rival["token"])
    assert denied["status"] == 404, denied


async def test_a_failed_replica_shows_its_exit_code_and_reason_and_runs_again_in_place(
    world: World,
) -> None:
    """Issue 10: kwok fails the `w` pod (Error, exit code 3) while its gang peer `ps` runs; the
    agent runs `w` again in place (attempt 2, a new pod that binds through the extender beside
    its running peer), and once it has failed more than `backoffLimit` times the job fails with
    the reason. `suanpan describe` shows both attempts with exit code and reason."""
    failing = task("w", "huawei/Ascend910B3", count=2, run_s=2)
    failing["annotations"] |= {ann.FAIL_REASON: "Error", ann.EXIT_CODE: "3"}
    peer = task("ps", "huawei/Ascend910B3", count=2, run_s=100_000)
    body = manifest("exits", failing, peer)
    body["spec"]["failurePolicy"] = {"backoffLimit": 1}
    job = await world.submit(body)

    async def retried() -> bool:
        found = await world.job(job["id"])
        return any(r["attempt"] == 2 for r in found["replicas"] if r["task"] == "w")

    await wait_for("attempt 2 of the failing replica", retried, 60)
    failed = await world.until(job["id"], "Failed", timeout_s=60)
    assert failed["reason"] == "Error" and failed["attempts"] == 2
    w = next(r for r in failed["replicas"] if r["task"] == "w")
    assert (w["attempt"], w["phase"], w["exitCode"], w["reason"]) == (2, "Failed", 3, "Error")
    assert w["lastFailure"]["exitCode"] == 3 and w["lastFailure"]["reason"] == "Error"
    pods = {p["metadata"]["name"]: p for p in await world.pods(failed["cluster"], job["id"])}
    again = pods[w["pod"]]
    first = pods[w["lastFailure"]["pod"]]  # kept for its logs
    assert again["metadata"]["labels"][ann.ATTEMPT_LABEL] == "2"
    assert again["spec"]["nodeName"] and ann.DEVICES in again["metadata"]["annotations"]
    assert again["spec"]["hostname"] == first["spec"]["hostname"] == "exits-w-0"
    env = {e["name"]: e.get("value") for e in again["spec"]["containers"][0]["env"]}
    assert env["RANK"] == "0" and env["WORLD_SIZE"] == "2"

    argv, env_vars = _cli(world, "describe", "job", job["id"])
    done = await asyncio.create_subprocess_exec(*argv, env=env_vars, stdout=PIPE, stderr=PIPE)
    out, err = await asyncio.wait_for(done.communicate(), 60)
    assert done.returncode == 0, err
    text = out.decode()
    print(text)  # the report quotes it
    assert "attempts: 2" in text
    lines = [line.split() for line in text.splitlines()]
    assert ["w", "0", "2", w["pod"], w["node"], "Failed", "3", "Error", "0"] in lines
    assert [
        "1",
        first["metadata"]["name"],
        w["lastFailure"]["node"],
        "Failed",
        "3",
        "Error",
    ] in lines
    assert any(line[1:3] == ["ReplicaFailed", "w-0"] and "exit" in line for line in lines)


def _pytorch_role(replicas: int) -> dict[str, Any]:
    container = {
        "name": "pytorch",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["torchrun", "train.py"],
        "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "2", "memory": "4Gi"}},
    }
    return {
        "replicas": replicas,
        "restartPolicy": "OnFailure",
        "template": {
            "metadata": {"annotations": {ann.RUN_SECONDS: "600"}},
            "spec": {"containers": [container]},
        },
    }


async def test_an_imported_pytorchjob_for_nvidia_runs_on_ascend(world: World) -> None:
    """Issue 10 part 4: a Kubeflow PyTorchJob as written for NVIDIA, with an Ascend image
    annotated, runs on Ascend with HCCL's runtime variables and the master's rendezvous."""
    imported = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "bert",
            "annotations": {
                "suanpan.io/image.huawei": "ascend-pytorch:2.1",
                "suanpan.io/flavors": "huawei/Ascend910B3",
            },
        },
        "spec": {"pytorchReplicaSpecs": {"Master": _pytorch_role(1), "Worker": _pytorch_role(1)}},
    }
    job = await world.submit(imported)
    running = await world.until(job["id"], "Running", timeout_s=60)
    pods = await world.pods(running["cluster"], job["id"])
    by_rank = {}
    for pod in pods:
        (main,) = pod["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in main["env"]}
        by_rank[env["RANK"]] = (pod["spec"]["hostname"], env, main)
    assert sorted(by_rank) == ["0", "1"]
    master_host = by_rank["0"][0]
    assert master_host == "bert-master-0" and by_rank["1"][0] == "bert-worker-0"
    for _, env, main in by_rank.values():
        assert main["image"] == "ascend-pytorch:2.1"
        assert main["resources"]["limits"]["huawei.com/Ascend910B3"] == "2"
        assert "nvidia.com/gpu" not in main["resources"]["limits"]
        assert env["MASTER_ADDR"].startswith(f"{master_host}.")
        assert (env["SUANPAN_DIST_BACKEND"], env["ASCEND_RT_VISIBLE_DEVICES"]) == ("hccl", "0,1")
    await world.fleet.call("POST", f"/v1/jobs/{job['id']}/cancel", world.token)


async def test_an_imported_batch_job_runs_to_success(world: World) -> None:
    imported = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl"},
        "spec": {
            "completions": 2,
            "template": {
                "metadata": {"annotations": {ann.RUN_SECONDS: "2"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "etl", "image": "python:3.11"}],
                },
            },
        },
    }
    job = await world.submit(imported)
    await world.until(job["id"], "Running", "Succeeded")
    done = await world.until(job["id"], "Succeeded")
    assert done["spec"]["spec"]["tasks"][0]["replicas"] == 2
