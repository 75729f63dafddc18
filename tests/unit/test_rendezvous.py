"""Distributed jobs find each other: stable hostnames under a headless Service, and the
rendezvous environment of PyTorch (torchrun) and MindSpore in every container."""

from __future__ import annotations

from typing import Any

from cluster_agents.agent.render import render
from federation.catalog import load_catalog
from federation.wire.agent import assigned_tasks
from tests.compiled_jobs import assignment, compiled

CATALOG = load_catalog()
JOB = "0f5c2a8e-3b7d-4c1e-9a6f-2d8b4e7c1a90"
SERVICE = f"sp-{JOB}-e2"
PREP = {"name": "prep", "replicas": 1, "image": "prep:1"}
TRAIN: dict[str, Any] = {
    "name": "train",
    "replicas": 2,
    "images": {"nvidia": "pytorch:2.4"},
    "resources": {"accelerators": {"count": 8, "anyOf": [{"flavor": "nvidia/H100*"}]}},
}


def test_ranks_count_every_replica_and_the_master_is_the_first_accelerator_task() -> None:
    placed = assignment(
        CATALOG,
        [PREP, TRAIN],
        {"prep": None, "train": "nvidia/H100-80GB"},
        job=JOB,
        epoch=2,
        name="llm",
    )
    pods = render(placed, "ns", CATALOG)
    master = f"llm-train-0.{SERVICE}"
    seen = [(p.task, p.hostname, p.service, p.env["RANK"], p.env["LOCAL_WORLD_SIZE"]) for p in pods]
    assert seen == [
        ("prep", "llm-prep-0", SERVICE, "0", "1"),
        ("train", "llm-train-0", SERVICE, "1", "8"),
        ("train", "llm-train-1", SERVICE, "2", "8"),
    ]
    for pod in pods:
        env = pod.env
        assert env["WORLD_SIZE"] == env["PET_NNODES"] == "3"
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == env["MS_SCHED_HOST"] == master
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == env["MS_SCHED_PORT"] == "29500"
        assert env["PET_NODE_RANK"] == env["RANK"]
        assert env["PET_NPROC_PER_NODE"] == env["LOCAL_WORLD_SIZE"]
        assert (env["SUANPAN_JOB_ID"], env["SUANPAN_JOB_NAME"]) == (JOB, "llm")
        assert env["SUANPAN_REPLICA"] == pod.hostname.rsplit("-", 1)[1]
    assert pods[2].env["MS_WORKER_NUM"] == "24"


def test_an_elastic_job_gets_torchruns_elastic_rendezvous_and_no_fixed_world() -> None:
    train = {k: v for k, v in TRAIN.items() if k != "replicas"} | {
        "minReplicas": 2,
        "maxReplicas": 6,
    }
    flavors = {"prep": None, "train": "nvidia/H100-80GB"}
    placed = assignment(CATALOG, [train, PREP], flavors, job=JOB, epoch=2, name="llm")
    held = assigned_tasks(compiled(CATALOG, [train, PREP]), flavors, {"train": 3})
    pods = render(placed.model_copy(update={"tasks": held}), "ns", CATALOG)
    master = f"llm-train-0.{SERVICE}"
    # the prep pod's rank stays 6 whatever the trainers grow or shrink to
    assert [p.env["RANK"] for p in pods] == ["0", "1", "2", "6"]
    for pod in pods:
        env = pod.env
        assert env["PET_NNODES"] == "3:7"  # every pod: the fixed prep and 2..6 trainers
        assert (env["PET_RDZV_BACKEND"], env["PET_RDZV_ID"]) == ("c10d", JOB)
        assert env["PET_RDZV_ENDPOINT"] == f"{master}:29400"
        assert env["MASTER_ADDR"] == master
        assert not {"WORLD_SIZE", "PET_NODE_RANK", "MS_WORKER_NUM"} & env.keys()


def test_a_single_pod_has_no_service_and_rendezvous_on_itself() -> None:
    (pod,) = render(assignment(CATALOG, [PREP], {"prep": None}, job=JOB), "ns", CATALOG)
    assert (pod.service, pod.hostname) == ("", "")
    assert (pod.env["MASTER_ADDR"], pod.env["WORLD_SIZE"], pod.env["RANK"]) == (
        "localhost",
        "1",
        "0",
    )


def test_a_name_too_long_for_a_hostname_falls_back_to_the_pod_name() -> None:
    long = "n" * 60
    pods = render(
        assignment(CATALOG, [TRAIN], {"train": "nvidia/H100-80GB"}, job=JOB, name=long),
        "ns",
        CATALOG,
    )
    assert [p.hostname for p in pods] == [p.name for p in pods]
    assert pods[1].env["MASTER_ADDR"] == f"{pods[0].name}.sp-{JOB}-e1"
