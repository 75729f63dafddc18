"""Imported Kubernetes manifests through the API on real PostgreSQL: stored as the converted
Suanpan job, malformed ones refused with the imported field's path and nothing stored."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Hub

pytestmark = pytest.mark.integration

PYTORCH_JOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: bert
  annotations: {suanpan.io/image.huawei: "ascend-pytorch:2"}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch:2
            resources: {limits: {nvidia.com/gpu: 1, cpu: "2", memory: 4Gi}}
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch:2
            resources: {limits: {nvidia.com/gpu: 1, cpu: "2", memory: 4Gi}}
"""
YAML = {"Content-Type": "application/yaml"}


async def test_pytorchjob_is_stored_as_its_suanpan_tasks(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    status, job = await hub.call("POST", "/v1/jobs", token, data=PYTORCH_JOB, headers=YAML)
    assert status == 201, job
    assert (job["name"], job["queue"]) == ("bert", "default")
    tasks = job["spec"]["spec"]["tasks"]
    assert [(t["name"], t["replicas"]) for t in tasks] == [("master", 1), ("worker", 2)]
    flavors = [c["flavor"] for c in tasks[0]["resources"]["accelerators"]["anyOf"]]
    assert flavors == ["nvidia/*", "huawei/*"]


async def test_batch_job_json_is_accepted(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl"},
        "spec": {
            "completions": 3,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "etl", "image": "python:3.11"}],
                }
            },
        },
    }
    status, job = await hub.call("POST", "/v1/jobs", token, json=manifest)
    assert status == 201, job
    assert job["spec"]["spec"]["tasks"][0]["replicas"] == 3


async def test_malformed_import_is_a_422_at_its_field_and_stores_nothing(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    indent = "\n            "
    broken = PYTORCH_JOB.replace(
        f"image: pytorch:2{indent}", f"image: pytorch:2{indent}tty: yes{indent}", 1
    )
    status, problem = await hub.call("POST", "/v1/jobs", token, data=broken, headers=YAML)
    assert status == 422, problem
    paths = [e["path"] for e in problem["errors"]]
    assert paths == ["spec.pytorchReplicaSpecs.Master.template.spec.containers[0].tty"]
    status, problem = await hub.call(
        "POST",
        "/v1/jobs",
        token,
        data=PYTORCH_JOB.replace("nvidia.com/gpu: 1", "amd.com/gpu: 1", 1),
        headers=YAML,
    )
    assert status == 422
    assert problem["errors"][0]["path"] == (
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.amd.com/gpu"
    )
    _, page = await hub.call("GET", "/v1/jobs", token)
    assert page["items"] == []


async def test_an_unknown_queue_is_named_at_its_annotation(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    noted = PYTORCH_JOB.replace("annotations: {", 'annotations: {suanpan.io/queue: "gold", ', 1)
    status, problem = await hub.call("POST", "/v1/jobs", token, data=noted, headers=YAML)
    assert status == 422, problem
    assert [e["path"] for e in problem["errors"]] == ["metadata.annotations.suanpan.io/queue"]
