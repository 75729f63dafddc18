"""Suanpan's pods as the agent reports them: phase, node and the real reason (pure).

The reason, first that applies:

1. `NodeLost`: the pod is bound to a node that is gone (then the pod is Failed: it will
   never run there again) or not Ready (phase left alone: the node may come back);
2. the pod's own `status.reason` (Evicted, OOMKilled from kwok, DeadlineExceeded, ...);
3. a container (init containers first) waiting for a reason other than a normal start
   (ErrImagePull, ImagePullBackOff, CrashLoopBackOff, CreateContainerConfigError, ...);
4. a container terminated with a reason other than Completed (OOMKilled, Error, ...);
5. `PodScheduled=False`: its reason (Unschedulable, SchedulingGated) and message.

It is ready while its `Ready` condition is True, its node Ready and it is not being deleted.

Its exit code is the first non-zero one of a terminated container (init containers first),
else the last termination's of a container waiting to restart, else the first terminated
container's; its restarts are all containers' together.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, cast, get_args

from cluster_agents.agent.backend import PodStatus
from cluster_agents.agent.ranktable import device_addresses
from cluster_agents.kube.api import timestamp
from federation.wire import annotations as ann
from federation.wire.agent import PodPhase

NODE_LOST = "NodeLost"
MESSAGE_MAX = 1024
_PHASES: frozenset[str] = frozenset(get_args(PodPhase))
_STARTING = frozenset({"ContainerCreating", "PodInitializing"})


@dataclass(frozen=True, slots=True)
class ManagedPod:
    """A pod Suanpan created, with the reason its own status gives."""

    name: str
    namespace: str
    job: str
    epoch: int
    task: str
    replica: int
    phase: PodPhase
    node: str
    reason: str
    message: str
    deleting: bool
    created_at: float
    gated: bool = False
    host_ip: str = ""
    pod_ip: str = ""
    devices: tuple[int, ...] = ()  # the extender's `DEVICES` at bind
    device_ips: tuple[tuple[int, str], ...] = ()  # the device plugin's addresses of them
    attempt: int = 1
    exit_code: int | None = None
    restarts: int = 0
    ready: bool = False
    generation: int = 0


def _devices(text: str | None) -> tuple[int, ...]:
    """The device indices of a `DEVICES` annotation ("0,1"); () when absent or malformed."""
    try:
        return tuple(int(i) for i in (text or "").split(",") if i)
    except ValueError:
        return ()


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def _phase(status: Mapping[str, Any]) -> PodPhase:
    phase = status.get("phase") or "Pending"
    return cast(PodPhase, phase) if phase in _PHASES else "Unknown"


def _statuses(status: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """Container statuses, init containers first."""
    return (
        *(status.get("initContainerStatuses") or ()),
        *(status.get("containerStatuses") or ()),
    )


def _exit(detail: Mapping[str, Any], restarts: int) -> str:
    """ ", exit code N, M restarts" of a terminated state, the parts that are known."""
    code = detail.get("exitCode")
    parts = ([f"exit code {code}"] if code is not None else []) + (
        [f"{restarts} restarts"] if restarts else []
    )
    return "".join(f", {p}" for p in parts)


def _container_reason(status: Mapping[str, Any], state: str) -> tuple[str, str]:
    """The first container (init ones first) in `state` with a reason that says something,
    with its exit code (or its last one, while it waits to restart) and restart count."""
    for c in _statuses(status):
        detail = (c.get("state") or {}).get(state) or {}
        reason = detail.get("reason") or ""
        if reason and reason not in _STARTING and reason != "Completed":
            message = detail.get("message") or ""
            restarts = int(c.get("restartCount") or 0)
            last = (c.get("lastState") or {}).get("terminated") or {}
            if state == "waiting" and last.get("reason"):
                message = (
                    f"{message} (last termination: {last['reason']}{_exit(last, restarts)})"
                ).strip()
            elif state == "terminated" and (known := _exit(detail, restarts)):
                message = f"{message or reason} ({known[2:]})"
            return reason, f"container {c.get('name', '')}: {message or reason}"
    return "", ""


def _failed_exit(status: Mapping[str, Any]) -> str:
    """ " (container c: exit code N)" for the first container that exited non-zero, else ""."""
    for c in _statuses(status):
        code = ((c.get("state") or {}).get("terminated") or {}).get("exitCode")
        if code:
            return f" (container {c.get('name', '')}: exit code {code})"
    return ""


def _exit_code(status: Mapping[str, Any]) -> int | None:
    """The exit code that tells what happened to the pod (None: no container ended yet)."""
    ended = [
        code
        for key in ("state", "lastState")
        for c in _statuses(status)
        if type(code := ((c.get(key) or {}).get("terminated") or {}).get("exitCode")) is int
        and -(2**31) <= code < 2**31
    ]
    return next((c for c in ended if c != 0), ended[0] if ended else None)


def _reason(status: Mapping[str, Any]) -> tuple[str, str]:
    if status.get("reason"):
        return str(status["reason"]), str(status.get("message") or "") + _failed_exit(status)
    for state in ("waiting", "terminated"):
        found = _container_reason(status, state)
        if found[0]:
            return found
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("reason") or "Unschedulable"), str(cond.get("message") or "")
    return "", ""


def managed_pod(
    pod: Mapping[str, Any], address_annotations: Collection[str] = ()
) -> ManagedPod | None:
    """Parse a v1 Pod Suanpan created (label `suanpan.io/managed=true`); None for others.
    `address_annotations`: where device plugins give the devices' addresses (catalog).

    Unparsable job labels give epoch 0, which no placement has: the agent fences such pods.
    """
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(ann.MANAGED_LABEL) != "true":
        return None
    status = pod.get("status") or {}
    reason, message = _reason(status)
    notes = meta.get("annotations") or {}
    given = next((notes[k] for k in address_annotations if k in notes), "")
    return ManagedPod(
        name=meta.get("name", ""),
        namespace=meta.get("namespace", ""),
        job=labels.get(ann.JOB_LABEL, ""),
        epoch=_int(labels.get(ann.EPOCH_LABEL)),
        task=labels.get(ann.TASK_LABEL, ""),
        replica=_int(labels.get(ann.REPLICA_LABEL)),
        phase=_phase(status),
        node=(pod.get("spec") or {}).get("nodeName") or "",
        reason=reason,
        message=message[:MESSAGE_MAX],
        deleting=bool(meta.get("deletionTimestamp")),
        created_at=timestamp(meta.get("creationTimestamp")),
        gated=bool((pod.get("spec") or {}).get("schedulingGates")),
        host_ip=status.get("hostIP") or "",
        pod_ip=status.get("podIP") or "",
        devices=_devices(notes.get(ann.DEVICES)),
        device_ips=device_addresses(given) if given else (),
        attempt=max(1, _int(labels.get(ann.ATTEMPT_LABEL))),
        exit_code=_exit_code(status),
        restarts=sum(int(c.get("restartCount") or 0) for c in _statuses(status)),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        ),
        generation=_int(labels.get(ann.GENERATION_LABEL)),
    )


def pod_status(pod: ManagedPod, node_ready: bool | None) -> PodStatus:
    """The pod's status given its node's readiness (None: the node does not exist)."""
    phase, reason, message = pod.phase, pod.reason, pod.message
    if pod.node and phase not in ("Succeeded", "Failed") and node_ready is not True:
        reason = NODE_LOST
        if node_ready is None:
            phase, message = "Failed", f"node {pod.node} is gone"
        else:
            message = f"node {pod.node} is not Ready"
    return PodStatus(
        name=pod.name,
        job=pod.job,
        epoch=pod.epoch,
        task=pod.task,
        replica=pod.replica,
        phase=phase,
        node=pod.node,
        reason=reason,
        message=message,
        deleting=pod.deleting,
        created_at=pod.created_at,
        gated=pod.gated,
        host_ip=pod.host_ip,
        pod_ip=pod.pod_ip,
        devices=pod.devices,
        device_ips=pod.device_ips,
        attempt=pod.attempt,
        exit_code=pod.exit_code,
        restarts=pod.restarts,
        ready=pod.ready and not pod.deleting and node_ready is True,
        generation=pod.generation,
    )
