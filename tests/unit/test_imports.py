"""Kubernetes Jobs and Kubeflow PyTorchJobs become Suanpan jobs, errors at their own fields."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from cluster_agents.agent.render import render
from federation.catalog import load_catalog
from federation.compiler import CompileError, compile_job
from federation.imports import Submission, annotated, to_manifest
from federation.spec import JobManifest
from tests.compiled_jobs import assignment

CATALOG = load_catalog()


def _container(gpus: object = None, **extra: Any) -> dict[str, Any]:
    limits = {"cpu": "4", "memory": "16Gi"} | ({"nvidia.com/gpu": gpus} if gpus else {})
    return {"name": "pytorch", "image": "pytorch:2", "resources": {"limits": limits}} | extra


PYTORCH_JOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {
        "name": "bert",
        "namespace": "ml",
        "annotations": {"suanpan.io/image.huawei": "ascend-pytorch:2", "suanpan.io/queue": "q"},
    },
    "spec": {
        "runPolicy": {"cleanPodPolicy": "None"},
        "pytorchReplicaSpecs": {
            "Worker": {
                "replicas": 3,
                "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [_container(2)]}},
            },
            "Master": {
                "replicas": 1,
                "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [_container(2, command=["torchrun"])]}},
            },
        },
    },
}
BATCH_JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "sweep"},
    "spec": {
        "completions": 4,
        "parallelism": 4,
        "backoffLimit": 2,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "log", "image": "fluent:1", "resources": {"requests": {"cpu": "1"}}},
                    _container(1),
                ],
            }
        },
    },
}


def _convert(document: dict[str, Any]) -> JobManifest:
    submitted = Submission.model_validate_json(json.dumps(document), strict=True).root
    assert not isinstance(submitted, JobManifest)
    return to_manifest(CATALOG, submitted)


def _paths(document: dict[str, Any]) -> list[str]:
    with pytest.raises((ValidationError, CompileError)) as caught:
        _convert(document)
    exc = caught.value
    if isinstance(exc, CompileError):
        return [exc.path]
    return [".".join(str(p) for p in e["loc"]) for e in exc.errors()]


def test_pytorchjob_becomes_master_then_workers_in_a_gang() -> None:
    job = compile_job(CATALOG, _convert(PYTORCH_JOB))
    assert job.gang and [(t.name, t.replicas) for t in job.tasks] == [("master", 1), ("worker", 3)]
    master = job.tasks[0]
    assert (master.container, master.cpu_milli, master.memory_mib) == ("pytorch", 4000, 16384)
    vendors = {o.vendor for o in master.options}
    assert vendors == {"nvidia", "huawei"}  # nvidia.com/gpu's models, and the annotated image's
    assert {o.image for o in master.options if o.vendor == "huawei"} == {"ascend-pytorch:2"}
    assert {o.count for o in master.options} == {2}
    placed = assignment(
        CATALOG,
        [t.model_dump(by_alias=True, exclude_unset=True) for t in _convert(PYTORCH_JOB).spec.tasks],
        {"master": "huawei/Ascend910B3", "worker": "huawei/Ascend910B3"},
    )
    pods = render(placed, "ns", CATALOG)
    assert [p.env["RANK"] for p in pods] == ["0", "1", "2", "3"]
    assert pods[0].task == "master" and all(
        p.env["MASTER_ADDR"] == f"{pods[0].hostname}.{pods[0].service}" for p in pods
    )
    assert pods[0].requests["huawei.com/Ascend910B3"] == "2"


def test_batch_job_completions_become_replicas_of_one_task() -> None:
    manifest = _convert(BATCH_JOB)
    assert manifest.spec.queue == "default" and not manifest.spec.gang
    (task,) = compile_job(CATALOG, manifest).tasks
    assert (task.name, task.replicas, task.container) == ("main", 4, "pytorch")
    assert {o.vendor for o in task.options} == {"nvidia"} and task.options[0].count == 1
    log = task.pod.spec.containers[0]
    assert log.resources is not None and log.resources.limits == {"cpu": "1"}


def test_work_queue_parallelism_is_the_replica_count() -> None:
    document = copy.deepcopy(BATCH_JOB)
    del document["spec"]["completions"]
    document["spec"]["parallelism"] = 6
    assert _convert(document).spec.tasks[0].replicas == 6


def test_a_flavor_annotation_replaces_the_flavors() -> None:
    document = annotated(copy.deepcopy(PYTORCH_JOB), {}, queue="gold")
    document["metadata"]["annotations"]["suanpan.io/flavors"] = "huawei/Ascend910B*"
    manifest = _convert(document)
    assert manifest.spec.queue == "gold"
    accel = manifest.spec.tasks[0].resources.accelerators
    assert accel is not None and [c.flavor for c in accel.any_of] == ["huawei/Ascend910B*"]


def _broken(path: list[str | int], value: object) -> dict[str, Any]:
    document = copy.deepcopy(PYTORCH_JOB)
    node: Any = document
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return document


WORKER = ["spec", "pytorchReplicaSpecs", "Worker"]
WORKER_CONTAINER = [*WORKER, "template", "spec", "containers", 0]


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (
            [*WORKER_CONTAINER, "imagePullPolicy"],
            7,
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers.0.imagePullPolicy",
        ),
        ([*WORKER, "replicas"], 0, "spec.pytorchReplicaSpecs.Worker.replicas"),
        (
            [*WORKER_CONTAINER, "resources", "limits", "nvidia.com/gpu"],
            "half",
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.nvidia.com/gpu",
        ),
        (
            [*WORKER_CONTAINER, "resources", "limits", "example.com/fpga"],
            1,
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.nvidia.com/gpu",
        ),
        (
            [*WORKER_CONTAINER, "resources", "limits", "memory"],
            "lots",
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers.0.resources.limits.memory",
        ),
        (["metadata", "name"], "Not_A_Label", "metadata.name"),
        (
            ["metadata", "annotations", "suanpan.io/queue"],
            "Q!",
            "metadata.annotations.suanpan.io/queue",
        ),
        (["spec", "pytorchReplicaSpecs", "Chief"], {}, "spec.pytorchReplicaSpecs.Chief"),
    ],
)
def test_malformed_imports_name_the_field_as_given(
    path: list[str | int], value: object, where: str
) -> None:
    assert where in _paths(_broken(path, value))


def test_batch_job_parallelism_below_completions_is_refused() -> None:
    document = copy.deepcopy(BATCH_JOB)
    document["spec"]["parallelism"] = 2
    assert _paths(document) == ["spec.parallelism"]


def test_suanpan_errors_keep_their_paths_through_the_union() -> None:
    document = {"apiVersion": "suanpan.io/v1", "kind": "Job", "metadata": {"name": "x"}}
    with pytest.raises(ValidationError) as caught:
        Submission.model_validate_json(json.dumps(document), strict=True)
    assert [e["loc"] for e in caught.value.errors()] == [("spec",)]
