"""A task's pod template: validated with field paths, compiled once, rendered with what Suanpan
owns set and merged (scheduler, devices, priority class, labels, tolerations, node affinity)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from cluster_agents.agent.render import render
from cluster_agents.backends.k8s_render import owner_reference, render_pod
from cluster_agents.kube.pods import pod_info
from federation.catalog import load_catalog
from federation.compiler import CompileError
from federation.spec import JobManifest
from tests.compiled_jobs import assignment, compiled, manifest

CATALOG = load_catalog()
ASCEND = "huawei/Ascend910B3"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "nlp"}, "annotations": {"example.com/owner": "ml"}},
    "spec": {
        "serviceAccountName": "trainer",
        "imagePullSecrets": [{"name": "registry"}],
        "nodeSelector": {"topology.kubernetes.io/zone": "a"},
        "terminationGracePeriodSeconds": 60,
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml"}],
        "affinity": {
            "nodeAffinity": {
                REQUIRED: {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                    ]
                }
            }
        },
        "initContainers": [
            {"name": "fetch", "image": "busybox", "command": ["cp", "/cfg/a", "/data/"]},
            {
                "name": "metrics",
                "image": "exporter:1",
                "restartPolicy": "Always",
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}},
            },
        ],
        "containers": [
            {
                "name": "trainer",
                "command": ["python", "train.py"],
                "ports": [{"name": "rdzv", "containerPort": 29500}],
                "env": [
                    {"name": "MODE", "value": "train"},
                    {
                        "name": "TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": "hub-token", "key": "token"}},
                    },
                ],
                "envFrom": [{"configMapRef": {"name": "settings"}}],
                "volumeMounts": [
                    {"name": "cfg", "mountPath": "/cfg", "readOnly": True},
                    {"name": "creds", "mountPath": "/creds"},
                    {"name": "data", "mountPath": "/data"},
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "bundle", "mountPath": "/bundle"},
                ],
                "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
            },
            {
                "name": "uploader",
                "image": "uploader:1",
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
            },
        ],
        "volumes": [
            {"name": "cfg", "configMap": {"name": "train-config"}},
            {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}},
            {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {
                "name": "bundle",
                "projected": {"sources": [{"configMap": {"name": "a"}}, {"secret": {"name": "b"}}]},
            },
        ],
    },
}


def _task(**fields: Any) -> dict[str, Any]:
    return {
        "name": "worker",
        "replicas": 2,
        "images": {"huawei": "mindspore:2.3", "nvidia": "pytorch:2.4"},
        "resources": {
            "cpu": "8",
            "memory": "64Gi",
            "accelerators": {"count": 4, "anyOf": [{"flavor": ASCEND}]},
        },
        "template": copy.deepcopy(TEMPLATE),
        **fields,
    }


def _pod(task: dict[str, Any], flavor: str | None = ASCEND) -> dict[str, Any]:
    spec = render(assignment(CATALOG, [task], {task["name"]: flavor}), "ns", CATALOG)[0]
    return render_pod(spec, owner_reference("j", 1, "u"))


def test_the_template_is_rendered_with_what_suanpan_owns_set_and_merged() -> None:
    pod = _pod(_task())
    spec = pod["spec"]
    trainer, uploader = spec["containers"]
    device = {"cpu": "8000m", "memory": "65536Mi", "huawei.com/Ascend910B3": "4"}
    assert trainer["image"] == "mindspore:2.3"  # the vendor's image from `images`
    assert trainer["resources"] == {"requests": device, "limits": device}
    user = [e for e in trainer["env"] if e["name"] in ("MODE", "TOKEN")]
    assert user == TEMPLATE["spec"]["containers"][0]["env"]
    assert trainer["envFrom"] == [{"configMapRef": {"name": "settings"}}]
    assert trainer["ports"] == [{"name": "rdzv", "containerPort": 29500}]
    assert trainer["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000}
    sidecar = {"cpu": "1", "memory": "1Gi"}
    assert uploader["resources"] == {"requests": sidecar, "limits": sidecar}
    assert uploader["image"] == "uploader:1"
    assert [c["name"] for c in spec["initContainers"]] == ["fetch", "metrics"]
    assert spec["initContainers"][1]["restartPolicy"] == "Always"
    *volumes, rank_table = spec["volumes"]
    assert volumes == TEMPLATE["spec"]["volumes"]
    assert rank_table["name"] == "suanpan-rank-table"  # Ascend's HCCL reads one
    assert spec["serviceAccountName"] == "trainer" and "automountServiceAccountToken" not in spec
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert spec["nodeSelector"] == {"topology.kubernetes.io/zone": "a"}
    assert spec["terminationGracePeriodSeconds"] == 60
    assert spec["schedulerName"] == "suanpan-scheduler"
    assert spec["priorityClassName"] == "suanpan-normal"
    assert spec["restartPolicy"] == "Never"
    assert spec["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "ml"},
        {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert spec["affinity"] == TEMPLATE["spec"]["affinity"]
    labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
    assert labels["team"] == "nlp" and labels["suanpan.io/task"] == "worker"
    assert annotations["example.com/owner"] == "ml"
    assert annotations["suanpan.io/flavor"] == ASCEND


def test_a_cpu_only_pods_node_rule_is_anded_into_each_of_the_users_terms() -> None:
    task = _task(images={}, resources={"cpu": "1", "memory": "1Gi"})
    task["template"]["spec"]["containers"][0]["image"] = "prep:1"
    terms = _pod(task, None)["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    (term,) = terms
    keys = [e["key"] for e in term["matchExpressions"]]
    assert keys[0] == "disk" and len(keys) > 1  # the user's, then the accelerator labels
    assert all(e["operator"] in ("DoesNotExist", "NotIn") for e in term["matchExpressions"][1:])


def test_the_hub_counts_the_whole_pod_as_kubernetes_does() -> None:
    """Containers and sidecars add up; an init container counts only if it is larger."""
    task = compiled(CATALOG, [_task()]).tasks[0]
    assert task.cpu_milli == 8000  # the task's container
    assert task.pod_cpu_milli == 8000 + 1000 + 500  # + uploader + the metrics sidecar
    assert task.pod_memory_mib == 65536 + 1024 + 256
    big_init = _task()
    big_init["template"]["spec"]["initContainers"][0]["resources"] = {"limits": {"cpu": "20"}}
    # it runs before the metrics sidecar starts: the pod needs 20 cores at that moment
    assert compiled(CATALOG, [big_init]).tasks[0].pod_cpu_milli == 20000
    (core,) = compiled(CATALOG, [_task()]).core_tasks()
    assert core.cpu_milli == 9500
    for form in (_task(), big_init):  # the agent's inventory and the extender count the same
        info = pod_info(CATALOG, _pod(form))
        task = compiled(CATALOG, [form]).tasks[0]
        assert (info.cpu_milli, info.memory_mib) == (task.pod_cpu_milli, task.pod_memory_mib)


def test_the_short_form_is_sugar_for_a_one_container_template() -> None:
    task = {"name": "prep", "image": "prep:1", "command": ["run"], "env": {"A": "1"}}
    pod = _pod(task, None)
    (container,) = pod["spec"]["containers"]
    assert container["name"] == "prep" and container["command"] == ["run"]
    assert container["env"][-1] == {"name": "A", "value": "1"}


def test_the_named_container_gets_the_devices() -> None:
    pod = _pod(_task(container="uploader", template=_without_uploader_limits()))
    trainer, uploader = pod["spec"]["containers"]
    assert "huawei.com/Ascend910B3" in uploader["resources"]["limits"]
    assert "resources" not in trainer


def _without_uploader_limits() -> dict[str, Any]:
    template = copy.deepcopy(TEMPLATE)
    del template["spec"]["containers"][1]["resources"]
    return template


def _errors(task: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as info:
        JobManifest.model_validate(manifest([task]))
    return [".".join(map(str, e["loc"])) for e in info.value.errors()]


def _edit(path: str, value: Any) -> dict[str, Any]:
    task = _task()
    node: Any = task["template"]
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(last) if last.isdigit() else last] = value
    return task


@pytest.mark.parametrize(
    ("path", "value", "loc"),
    [
        ("spec.schedulerName", "default", "spec.schedulerName"),
        ("spec.priorityClassName", "x", "spec.priorityClassName"),
        ("spec.restartPolicy", "Always", "spec.restartPolicy"),
        ("spec.nodeName", "n1", "spec.nodeName"),
        (
            "spec.containers.1.resources",
            {"limits": {"nvidia.com/gpu": "1"}},
            "spec.containers.1.resources.limits.nvidia.com/gpu",
        ),
        ("spec.containers.0.restartPolicy", "Always", "spec"),
        ("metadata.labels", {"suanpan.io/job": "x"}, "metadata.labels"),
        ("spec.containers.0.name", "Trainer", "spec.containers.0.name"),
        ("spec.containers.0.ports", [{"containerPort": 0}], "spec.containers.0.ports.0"),
        ("spec.containers.0.env", [{"name": "1=X", "value": "a"}], "spec.containers.0.env.0"),
        ("spec.volumes.0", {"name": "cfg"}, "spec.volumes.0"),
        (
            "spec.volumes.0",
            {"name": "cfg", "emptyDir": {}, "secret": {"secretName": "s"}},
            "spec.volumes.0",
        ),
        ("spec.containers.0.volumeMounts.0.name", "nope", "spec"),
        ("spec.containers.0.envFrom", [{}], "spec.containers.0.envFrom.0"),
        ("spec.tolerations", [{"operator": "Equal", "value": "x"}], "spec.tolerations.0"),
        ("spec.volumes.2.persistentVolumeClaim", {"claimName": "A_B"}, "spec.volumes.2"),
    ],
)
def test_bad_templates_are_refused_with_the_field_path(path: str, value: Any, loc: str) -> None:
    locs = _errors(_edit(path, value))
    prefix = f"spec.tasks.0.template.{loc}"
    assert any(item.startswith(prefix) for item in locs), locs


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"command": ["x"]}, "spec.tasks[0].command"),
        ({"image": "x"}, "spec.tasks[0].image"),
        ({"env": {"A": "1"}}, "spec.tasks[0].env"),
        ({"container": "nope"}, "spec.tasks[0].container"),
    ],
)
def test_the_short_form_beside_a_template_is_refused(fields: dict[str, Any], path: str) -> None:
    with pytest.raises(CompileError) as info:
        compiled(CATALOG, [_task(**fields)])
    assert info.value.path == path


def test_the_task_container_takes_the_tasks_cpu_not_its_own_limit() -> None:
    task = _task()
    task["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "4"}}
    with pytest.raises(CompileError) as info:
        compiled(CATALOG, [task])
    assert info.value.path == "spec.tasks[0].template.spec.containers[0].resources.limits.cpu"
