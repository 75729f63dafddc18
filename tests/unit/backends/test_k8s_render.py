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
from federation.podtemplate import PodTemplate
from tests.compiled_jobs import assignment
from tests.unit.backends.k8s_objects import CATALOG, JOB

WORKER: dict[str, Any] = {
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
ASSIGNMENT = assignment(
    CATALOG,
    [WORKER],
    {"worker": "huawei/Ascend910B3"},
    job=JOB,
    epoch=3,
    name="llm",
    priority=1000,
    priority_class="high",
)


def spec() -> PodSpec:
    return render(ASSIGNMENT, "suanpan", CATALOG)[1]


def as_json(obj: Any) -> dict[str, Any]:
    """The object as the API receives it (camelCase, no nulls)."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(obj if isinstance(obj, dict) else obj.to_dict(serialize=True))  # type: ignore[no-any-return]


MASTER = f"llm-worker-0.sp-{JOB}-e3"
ASCEND_RUNTIME = {  # the catalog's huawei runtime profile, 4 devices
    "SUANPAN_COLLECTIVE": "HCCL",
    "SUANPAN_DIST_BACKEND": "hccl",
    "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3",
    "RANK_TABLE_FILE": "/user/serverid/devindex/config/hccl.json",
}
RANK_TABLE = f"sp-{JOB}-e3-rank-table"
RENDEZVOUS = {
    "SUANPAN_JOB_ID": JOB,
    "SUANPAN_JOB_NAME": "llm",
    "SUANPAN_TASK": "worker",
    "SUANPAN_REPLICA": "1",
    "RANK": "1",
    "WORLD_SIZE": "2",
    "LOCAL_WORLD_SIZE": "4",
    "MASTER_ADDR": MASTER,
    "MASTER_PORT": "29500",
    "PET_NNODES": "2",
    "PET_NODE_RANK": "1",
    "PET_NPROC_PER_NODE": "4",
    "PET_MASTER_ADDR": MASTER,
    "PET_MASTER_PORT": "29500",
    "MS_SCHED_HOST": MASTER,
    "MS_SCHED_PORT": "29500",
    "MS_WORKER_NUM": "8",
}


def test_pod_from_rendered_assignment() -> None:
    owner = owner_reference(JOB, 3, "owner-uid")
    pod = as_json(render_pod(spec(), owner))
    requests = {"cpu": "8000m", "memory": "65536Mi", "huawei.com/Ascend910B3": "4"}
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "sp-0f5c2a8e-e3-worker-1",
            "namespace": "suanpan-t",  # the tenant's
            "labels": {
                "suanpan.io/managed": "true",
                "suanpan.io/job": JOB,
                "suanpan.io/task": "worker",
                "suanpan.io/replica": "1",
                "suanpan.io/epoch": "3",
                "suanpan.io/attempt": "1",
            },
            "annotations": {
                "suanpan.io/flavor": "huawei/Ascend910B3",
                "suanpan.io/device-request": '{"count":4,"milli":1000,"memoryMib":0}',
                "suanpan.io/gang": f"{JOB}-e3",
                "suanpan.io/gang-size": "2",
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
                    "env": [
                        *({"name": k, "value": v} for k, v in ASCEND_RUNTIME.items()),
                        *({"name": k, "value": v} for k, v in RENDEZVOUS.items()),
                        {"name": "B", "value": "2"},
                        {"name": "A", "value": "1"},
                    ],
                    "resources": {"requests": requests, "limits": requests},
                    "volumeMounts": [  # HCCL's rank table, a directory the kubelet refreshes
                        {
                            "name": "suanpan-rank-table",
                            "mountPath": "/user/serverid/devindex/config",
                            "readOnly": True,
                        }
                    ],
                }
            ],
            "volumes": [{"name": "suanpan-rank-table", "configMap": {"name": RANK_TABLE}}],
            "restartPolicy": "Never",
            "schedulerName": "suanpan-scheduler",
            "tolerations": [
                {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "priorityClassName": "suanpan-high",
            "hostname": "llm-worker-1",
            "subdomain": f"sp-{JOB}-e3",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "schedulingGates": [{"name": "suanpan.io/gang"}],
        },
    }


def test_the_visible_devices_variable_is_read_from_the_binds_annotation() -> None:
    xpu = {"count": 4, "anyOf": [{"flavor": "kunlunxin/P800"}]}
    task = {**WORKER, "resources": {"accelerators": xpu}}
    kunlun = assignment(CATALOG, [task], {"worker": "kunlunxin/P800"}, job=JOB, gang=False)
    pod = as_json(render_pod(render(kunlun, "suanpan", CATALOG)[0], owner_reference(JOB, 3, "u")))
    assert pod["spec"]["containers"][0]["env"][-1] == {
        "name": "XPU_VISIBLE_DEVICES",
        "valueFrom": {
            "fieldRef": {"fieldPath": "metadata.annotations['suanpan.io/visible-devices']"}
        },
    }
    assert "schedulingGates" not in pod["spec"]
    assert "suanpan.io/gang" not in pod["metadata"]["annotations"]


def test_cpu_only_pods_require_nodes_without_accelerator_labels() -> None:
    task = {k: v for k, v in WORKER.items() if k != "resources"}
    cpu = assignment(CATALOG, [task], {"worker": None}, job=JOB)
    pod = as_json(render_pod(render(cpu, "suanpan", CATALOG)[0], owner_reference(JOB, 1, "u")))
    (term,) = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    rules = {e["key"]: (e["operator"], e.get("values")) for e in term["matchExpressions"]}
    assert rules["suanpan.io/accelerator.vendor"] == ("DoesNotExist", None)
    assert rules["nvidia.com/gpu.product"] == ("DoesNotExist", None)
    assert rules["node.kubernetes.io/npu.chip.name"] == ("DoesNotExist", None)
    assert rules["accelerator"] == ("NotIn", ["huawei-Ascend310P", "huawei-Ascend910"])
    # gang members that bind without the extender are gated but carry no GANG annotation
    assert pod["spec"]["schedulingGates"] == [{"name": "suanpan.io/gang"}]
    assert "suanpan.io/gang" not in pod["metadata"].get("annotations", {})
    opted = {**task, "annotations": {"suanpan.io/accelerator-nodes": "allow"}}
    allowed = render(assignment(CATALOG, [opted], {"worker": None}, job=JOB), "suanpan", CATALOG)
    assert not allowed[0].avoid_nodes


def test_optional_fields() -> None:
    bare = replace(
        spec(),
        template=PodTemplate.model_validate({"spec": {"containers": [{"name": "worker"}]}}),
        env={},
        hostname="",
        service="",
        annotations={},
        priority_class="",
        scheduler_name="",
        node_selector={"kubernetes.io/hostname": "n1"},
        tolerations=(Toleration("dedicated", "NoExecute", "ai"),),
    )
    pod = as_json(render_pod(bare, owner_reference(JOB, 3, "u")))
    container = pod["spec"]["containers"][0]
    assert not {"command", "args", "env"} & container.keys()
    unset = {"priorityClassName", "schedulerName", "priority", "hostname", "subdomain"}
    assert not unset & pod["spec"].keys()
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
