"""Kubernetes objects the backend creates, rendered from the agent's neutral types (pure).

- one owner ConfigMap per (job, epoch): every pod of that placement has an ownerReference
  to it, so deleting the owner makes the garbage collector delete the pods;
- the pods, from the task's pod template: requests equal limits, restartPolicy Never (the hub
  decides about retries; Always for a service's pods: the kubelet restarts them in place, its
  probes decide when they are Ready), no service account token unless the template names a service
  account; env vars read from annotations the extender writes at bind (a `fieldRef`, resolved
  at container start), a required node affinity avoiding accelerator nodes for CPU-only pods
  ANDed into the user's, tolerations added to the user's, and the gang's scheduling gate;
- a headless Service per placement of more than one pod (owned like the pods), the pods'
  subdomain, so `<hostname>.<service>` resolves for rendezvous;
- a ClusterIP Service per service shard, named after the service, selecting the placement's
  pods (every template generation) on the service's ports;
- a rank-table ConfigMap per placement whose vendor's collective library reads one (owned like
  the pods), mounted as a directory in each pod's task container;
- a PriorityClass per hub priority class, preemptionPolicy Never: the hub chooses victims,
  kube-scheduler must not evict anything on its own for our pods.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import (
    V1ConfigMap,
    V1ObjectMeta,
    V1OwnerReference,
    V1PriorityClass,
)

from cluster_agents.agent.backend import NodeExclusion, PodSpec, ShardService, Toleration
from cluster_agents.agent.ranktable import RankTableMount
from federation.wire import annotations as ann

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
RANK_TABLE_VOLUME = "suanpan-rank-table"


def owner_name(job: str, epoch: int) -> str:
    """Name of the owner ConfigMap of one placement."""
    return f"suanpan-{job}-e{epoch}"


def render_owner(job: str, epoch: int, namespace: str) -> V1ConfigMap:
    """The owner ConfigMap of a placement (no data: it only anchors the pods)."""
    return V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=V1ObjectMeta(
            name=owner_name(job, epoch),
            namespace=namespace,
            labels=placement_labels(job, epoch),
        ),
    )


def owner_reference(job: str, epoch: int, uid: str) -> V1OwnerReference:
    """A pod's reference to its placement's owner ConfigMap."""
    return V1OwnerReference(
        api_version="v1", kind="ConfigMap", name=owner_name(job, epoch), uid=uid, controller=True
    )


def _toleration(t: Toleration) -> dict[str, str]:
    if t.value:
        return {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect}
    return {"key": t.key, "operator": "Exists", "effect": t.effect}


def _from_annotation(name: str, key: str) -> dict[str, Any]:
    """An env var the kubelet reads from a pod annotation when the container starts."""
    path = f"metadata.annotations['{key}']"
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _avoiding(affinity: dict[str, Any], exclusions: tuple[NodeExclusion, ...]) -> None:
    """Add to `affinity` a required node rule no node with any of these labels satisfies: the
    expressions are ANDed into each of the user's required terms (one term if none)."""
    if not exclusions:
        return
    expressions = [
        {"key": e.key, "operator": "NotIn", "values": list(e.values)}
        if e.values
        else {"key": e.key, "operator": "DoesNotExist"}
        for e in exclusions
    ]
    node = affinity.setdefault("nodeAffinity", {})
    required = node.setdefault(REQUIRED, {"nodeSelectorTerms": [{}]})
    for term in required["nodeSelectorTerms"]:
        term["matchExpressions"] = [*term.get("matchExpressions", []), *expressions]


def _requests_are_limits(container: dict[str, Any]) -> None:
    limits = container.get("resources", {}).get("limits")
    if limits:
        container["resources"] = {"requests": dict(limits), "limits": dict(limits)}


def render_pod(spec: PodSpec, owner: V1OwnerReference) -> dict[str, Any]:
    """The v1 Pod (JSON) of a `PodSpec`, owned by `owner`: the task's template with what
    Suanpan owns set (scheduler, priority class, restart policy, gate, the task container's
    image and resources) and merged (labels, annotations, env, tolerations, node affinity)."""
    pod = spec.template.spec.model_dump(mode="json", exclude_none=True)
    meta = spec.template.metadata
    env = [{"name": k, "value": v} for k, v in spec.env.items()]
    for container in [*pod["containers"], *pod.get("initContainers", [])]:
        _requests_are_limits(container)
        if env:
            container["env"] = [*env, *container.get("env", [])]  # the user's win
        if container["name"] != spec.container:
            continue
        container["image"] = spec.image
        container["resources"] = {"requests": dict(spec.requests), "limits": dict(spec.requests)}
        env_from = [_from_annotation(k, v) for k, v in sorted(spec.env_from_annotations.items())]
        if env_from:
            container["env"] = [*container.get("env", []), *env_from]
        if spec.rank_table is not None:
            mount = {
                "name": RANK_TABLE_VOLUME,
                "mountPath": spec.rank_table.directory,
                "readOnly": True,
            }
            container["volumeMounts"] = [*container.get("volumeMounts", []), mount]
    if spec.rank_table is not None:
        volume = {"name": RANK_TABLE_VOLUME, "configMap": {"name": spec.rank_table.config_map}}
        pod["volumes"] = [*pod.get("volumes", []), volume]
    affinity = pod.setdefault("affinity", {})
    _avoiding(affinity, spec.avoid_nodes)
    if not affinity:
        del pod["affinity"]
    tolerations = [*pod.get("tolerations", []), *map(_toleration, spec.tolerations)]
    node_selector = {**pod.get("nodeSelector", {}), **spec.node_selector}
    pod |= {
        "restartPolicy": spec.restart_policy,
        "schedulerName": spec.scheduler_name or None,
        "nodeSelector": node_selector or None,
        "tolerations": tolerations or None,
        "schedulingGates": [{"name": ann.GANG_GATE}] if spec.gated else None,
        "priorityClassName": spec.priority_class or None,
        "hostname": spec.hostname or None,
        "subdomain": spec.service or None,
        "enableServiceLinks": False,
    }
    if "serviceAccountName" not in pod:
        pod["automountServiceAccountToken"] = False
    metadata = {
        "name": spec.name,
        "namespace": spec.namespace,
        "labels": {**meta.labels, **spec.labels},
        "annotations": {**meta.annotations, **spec.annotations} or None,
        "ownerReferences": [owner.to_dict(serialize=True)],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _dropped_none(metadata),
        "spec": _dropped_none(pod),
    }


def _dropped_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def render_service(spec: PodSpec, owner: V1OwnerReference) -> dict[str, Any]:
    """The headless Service of a placement (`spec`: one of its pods): every pod of the placement
    resolves as `<hostname>.<service>`, before it is ready too, so ranks can rendezvous."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _placement_metadata(spec.service, spec, owner),
        "spec": {
            "clusterIP": "None",
            "selector": placement_selector(spec.job, spec.epoch),
            "publishNotReadyAddresses": True,
        },
    }


def render_shard_service(service: ShardService) -> dict[str, Any]:
    """The ClusterIP Service of a service shard: the in-cluster address of its ready pods."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service.name,
            "namespace": service.namespace,
            "labels": placement_labels(service.job, service.epoch),
        },
        "spec": {
            "type": "ClusterIP",
            "selector": placement_selector(service.job, service.epoch),
            "ports": [
                {"name": p.name, "port": p.port, "targetPort": p.port, "protocol": p.protocol}
                for p in service.ports
            ],
        },
    }


def placement_selector(job: str, epoch: int) -> dict[str, str]:
    """The labels that select a placement's pods."""
    return {ann.JOB_LABEL: job, ann.EPOCH_LABEL: str(epoch)}


def placement_labels(job: str, epoch: int) -> dict[str, str]:
    """The labels of an object of a placement."""
    return {ann.MANAGED_LABEL: "true", **placement_selector(job, epoch)}


def render_rank_table(
    spec: PodSpec, mount: RankTableMount, owner: V1OwnerReference, content: str
) -> dict[str, Any]:
    """A placement's rank-table ConfigMap (`spec`: one of its pods), owned like its pods."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _placement_metadata(mount.config_map, spec, owner),
        "data": {mount.key: content},
    }


def _placement_metadata(name: str, spec: PodSpec, owner: V1OwnerReference) -> dict[str, Any]:
    """Metadata of an object of the placement of `spec`'s pod, owned like the pods."""
    return {
        "name": name,
        "namespace": spec.namespace,
        "labels": placement_labels(spec.job, spec.epoch),
        "ownerReferences": [owner.to_dict(serialize=True)],
    }


def render_priority_class(name: str, value: int) -> V1PriorityClass:
    """A PriorityClass for a hub priority class (its value is fixed once created)."""
    return V1PriorityClass(
        api_version="scheduling.k8s.io/v1",
        kind="PriorityClass",
        metadata=V1ObjectMeta(name=name, labels={ann.MANAGED_LABEL: "true"}),
        value=value,
        preemption_policy="Never",
        global_default=False,
        description="Suanpan hub priority class (the hub preempts, not kube-scheduler)",
    )
