"""PodSpec to V1Pod, the placement's owner ConfigMap and the PriorityClass."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cluster_agents.agent.backend import PodSpec, Toleration
from cluster_agents.agent.render import render
from cluster_agents.backends.k8s_render import (
    owner_name,
    owner_reference,
    render_owner,
    render_pod,
    render_priority_class,
)
from tests.compiled_jobs import assignment
from tests.unit.backends.k8s_objects import CATALOG, JOB

ASSIGNMENT = assignment(
    CATALOG,
    [
        {
            "name": "worker",
            "replicas": 2,
            "image": "train:1",
            "command": ["python"],
            "args": ["train.py"],
            "env": {"B": "2", "A": "1"},
            "resources": {
                "cpu": "8",
                "memory": "64Gi",
                "accelerators": {"count": 4, "anyOf": [{"flavor": "huawei/Ascend910B3"}]},
            },
        }
    ],
    {"worker": "huawei/Ascend910B3"},
    job=JOB,
    epoch=3,
    name="llm",
    priority=1000,
    priority_class="high",
)


def spec() -> PodSpec:
    return render(ASSIGNMENT, "suanpan")[1]


def as_json(obj: Any) -> dict[str, Any]:
    """The object as the API receives it (camelCase, no nulls)."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(obj.to_dict(serialize=True))  # type: ignore[no-any-return]


def test_pod_from_rendered_assignment() -> None:
    owner = owner_reference(JOB, 3, "owner-uid")
    pod = as_json(render_pod(spec(), owner))
    requests = {"cpu": "8000m", "memory": "65536Mi", "huawei.com/Ascend910B3": "4"}
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "sp-0f5c2a8e-e3-worker-1",
            "namespace": "suanpan",
            "labels": {
                "suanpan.io/managed": "true",
                "suanpan.io/job": JOB,
                "suanpan.io/task": "worker",
                "suanpan.io/replica": "1",
                "suanpan.io/epoch": "3",
            },
            "annotations": {
                "suanpan.io/flavor": "huawei/Ascend910B3",
                "suanpan.io/device-request": '{"count":4,"milli":1000,"memoryMib":0}',
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": f"suanpan-{JOB}-e3",
                    "uid": "owner-uid",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "worker",
                    "image": "train:1",
                    "command": ["python"],
                    "args": ["train.py"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
            "restartPolicy": "Never",
            "schedulerName": "suanpan-scheduler",
            "tolerations": [
                {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "priorityClassName": "suanpan-high",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
        },
    }


def test_optional_fields() -> None:
    bare = replace(
        spec(),
        command=(),
        args=(),
        env={},
        annotations={},
        priority_class="",
        scheduler_name="",
        node_selector={"kubernetes.io/hostname": "n1"},
        tolerations=(Toleration("dedicated", "NoExecute", "ai"),),
    )
    pod = as_json(render_pod(bare, owner_reference(JOB, 3, "u")))
    container = pod["spec"]["containers"][0]
    assert not {"command", "args", "env"} & container.keys()
    assert not {"priorityClassName", "schedulerName", "priority"} & pod["spec"].keys()
    assert "annotations" not in pod["metadata"]
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n1"}
    assert pod["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "ai", "effect": "NoExecute"}
    ]


def test_owner_config_map() -> None:
    assert owner_name(JOB, 3) == f"suanpan-{JOB}-e3"
    assert as_json(render_owner(JOB, 3, "suanpan")) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"suanpan-{JOB}-e3",
            "namespace": "suanpan",
            "labels": {
                "suanpan.io/managed": "true",
                "suanpan.io/job": JOB,
                "suanpan.io/epoch": "3",
            },
        },
    }


def test_priority_class_never_preempts_in_the_cluster() -> None:
    pc = as_json(render_priority_class("suanpan-high", 1000))
    assert (pc["metadata"]["name"], pc["value"]) == ("suanpan-high", 1000)
    assert (pc["preemptionPolicy"], pc["globalDefault"]) == ("Never", False)
