"""Render an assignment into pods (pure: the compiled tasks and the hub's choice in, pods out).

Nothing is matched or rounded here: the compiled option of the chosen flavor already holds the
image, the extended resources, the device request and the vendor's tolerations, and the
compiled task the CPU and memory in the units the hub counts. Per replica the pod gets those,
the job's priority class, our scheduler name, and the labels/annotations of
`federation.wire.annotations` that fence and describe it.
"""

from __future__ import annotations

import json

from cluster_agents.agent.backend import PodSpec, Toleration
from federation.compiled import DeviceOption
from federation.wire import annotations as ann
from federation.wire.agent import Assignment


class RenderError(ValueError):
    """The assignment cannot be turned into pods (a task without accelerators or image)."""


def pod_name(job: str, epoch: int, task: str, replica: int) -> str:
    """Deterministic pod name: the same assignment always renders the same names."""
    return f"sp-{job[:8]}-e{epoch}-{task}-{replica}"[:63].rstrip("-")


def device_request_annotation(option: DeviceOption) -> str:
    """The `DEVICE_REQUEST` annotation of a pod running with `option` (what the extender reads)."""
    return json.dumps(
        {"count": option.count, "milli": option.milli, "memoryMib": option.memory_mib},
        separators=(",", ":"),
    )


def render(assignment: Assignment, namespace: str) -> list[PodSpec]:
    """The pods of an Active assignment, every replica of every task."""
    job = str(assignment.job)
    hints = {(h.task, h.replica): h for h in assignment.hints}
    pods: list[PodSpec] = []
    for assigned in assignment.tasks:
        task, option = assigned.task, assigned.device
        requests = {"cpu": f"{task.cpu_milli}m", "memory": f"{task.memory_mib}Mi"}
        annotations = dict(task.annotations)
        tolerations: tuple[Toleration, ...] = ()
        image = task.image
        if option is not None:
            requests.update(option.resources)
            annotations[ann.FLAVOR] = option.flavor
            annotations[ann.DEVICE_REQUEST] = device_request_annotation(option)
            tolerations = tuple(Toleration(t.key, t.effect) for t in option.tolerations)
            image = option.image
        if not image:
            raise RenderError(f"task {task.name!r} has no image and no accelerator option")
        for replica in range(task.replicas):
            hint = hints.get((task.name, replica))
            pod_annotations = dict(annotations)
            if hint is not None:
                pod_annotations[ann.HINT_DEVICES] = (
                    f"{hint.node}:{','.join(map(str, hint.devices))}"
                )
            pods.append(
                PodSpec(
                    name=pod_name(job, assignment.epoch, task.name, replica),
                    namespace=namespace,
                    job=job,
                    epoch=assignment.epoch,
                    task=task.name,
                    replica=replica,
                    image=image,
                    labels={
                        ann.MANAGED_LABEL: "true",
                        ann.JOB_LABEL: job,
                        ann.TASK_LABEL: task.name,
                        ann.REPLICA_LABEL: str(replica),
                        ann.EPOCH_LABEL: str(assignment.epoch),
                    },
                    annotations=pod_annotations,
                    requests=requests,
                    command=task.command,
                    args=task.args,
                    env=dict(task.env),
                    tolerations=tolerations,
                    priority=assignment.priority,
                    priority_class=f"suanpan-{assignment.priority_class}",
                    scheduler_name=ann.SCHEDULER_NAME,
                )
            )
    return pods
