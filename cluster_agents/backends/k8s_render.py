"""Kubernetes objects the backend creates, rendered from the agent's neutral types (pure).

- one owner ConfigMap per (job, epoch): every pod of that placement has an ownerReference
  to it, so deleting the owner makes the garbage collector delete the pods;
- the pods: requests equal limits, restartPolicy Never (the hub decides about retries),
  no service account token (workloads do not talk to the API); env vars read from annotations
  the extender writes at bind (a `fieldRef`, resolved at container start), a required node
  affinity avoiding accelerator nodes for CPU-only pods, and the gang's scheduling gate;
- a PriorityClass per hub priority class, preemptionPolicy Never: the hub chooses victims,
  kube-scheduler must not evict anything on its own for our pods.
"""

from __future__ import annotations

from kubernetes_asyncio.client import (
    V1Affinity,
    V1ConfigMap,
    V1Container,
    V1EnvVar,
    V1EnvVarSource,
    V1NodeAffinity,
    V1NodeSelector,
    V1NodeSelectorRequirement,
    V1NodeSelectorTerm,
    V1ObjectFieldSelector,
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodSchedulingGate,
    V1PodSpec,
    V1PriorityClass,
    V1ResourceRequirements,
    V1Toleration,
)

from cluster_agents.agent.backend import NodeExclusion, PodSpec, Toleration
from federation.wire import annotations as ann


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
            labels={ann.MANAGED_LABEL: "true", ann.JOB_LABEL: job, ann.EPOCH_LABEL: str(epoch)},
        ),
    )


def owner_reference(job: str, epoch: int, uid: str) -> V1OwnerReference:
    """A pod's reference to its placement's owner ConfigMap."""
    return V1OwnerReference(
        api_version="v1", kind="ConfigMap", name=owner_name(job, epoch), uid=uid, controller=True
    )


def _toleration(t: Toleration) -> V1Toleration:
    if t.value:
        return V1Toleration(key=t.key, operator="Equal", value=t.value, effect=t.effect)
    return V1Toleration(key=t.key, operator="Exists", effect=t.effect)


def _from_annotation(name: str, key: str) -> V1EnvVar:
    """An env var the kubelet reads from a pod annotation when the container starts."""
    path = f"metadata.annotations['{key}']"
    return V1EnvVar(
        name=name, value_from=V1EnvVarSource(field_ref=V1ObjectFieldSelector(field_path=path))
    )


def _avoiding(exclusions: tuple[NodeExclusion, ...]) -> V1Affinity | None:
    """A required node affinity that no node with any of these labels satisfies."""
    if not exclusions:
        return None
    expressions = [
        V1NodeSelectorRequirement(key=e.key, operator="NotIn", values=list(e.values))
        if e.values
        else V1NodeSelectorRequirement(key=e.key, operator="DoesNotExist")
        for e in exclusions
    ]
    required = V1NodeSelector(
        node_selector_terms=[V1NodeSelectorTerm(match_expressions=expressions)]
    )
    return V1Affinity(
        node_affinity=V1NodeAffinity(required_during_scheduling_ignored_during_execution=required)
    )


def render_pod(spec: PodSpec, owner: V1OwnerReference) -> V1Pod:
    """The v1 Pod of a `PodSpec`, owned by `owner`."""
    env = [V1EnvVar(name=k, value=v) for k, v in sorted(spec.env.items())]
    env += [_from_annotation(k, v) for k, v in sorted(spec.env_from_annotations.items())]
    container = V1Container(
        name=spec.task,
        image=spec.image,
        command=list(spec.command) or None,
        args=list(spec.args) or None,
        env=env or None,
        resources=V1ResourceRequirements(requests=dict(spec.requests), limits=dict(spec.requests)),
    )
    return V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=V1ObjectMeta(
            name=spec.name,
            namespace=spec.namespace,
            labels=dict(spec.labels),
            annotations=dict(spec.annotations) or None,
            owner_references=[owner],
        ),
        spec=V1PodSpec(
            containers=[container],
            restart_policy="Never",
            scheduler_name=spec.scheduler_name or None,
            node_selector=dict(spec.node_selector) or None,
            tolerations=[_toleration(t) for t in spec.tolerations] or None,
            affinity=_avoiding(spec.avoid_nodes),
            scheduling_gates=[V1PodSchedulingGate(name=ann.GANG_GATE)] if spec.gated else None,
            priority_class_name=spec.priority_class or None,
            automount_service_account_token=False,
            enable_service_links=False,
        ),
    )


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
