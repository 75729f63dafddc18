"""Render an assignment into pods (pure: the compiled tasks and the hub's choice in, pods out).

Nothing is matched or rounded here: the compiled option of the chosen flavor already holds the
image, the extended resources, the device request and the vendor's tolerations, and the
compiled task the pod template and the CPU and memory in the units the hub counts. Per replica
the pod gets those,
the job's priority class, our scheduler name, and the labels/annotations of
`federation.wire.annotations` that fence and describe it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from cluster_agents.agent.backend import NodeExclusion, PodSpec, Toleration
from cluster_agents.agent.ranktable import RankTableMount, config_map_name
from federation.catalog import AcceleratorModel, Catalog
from federation.compiled import DeviceOption
from federation.k8s_names import tenant_namespace
from federation.wire import annotations as ann
from federation.wire.agent import Assignment

MASTER_PORT = 29500  # torchrun's default rendezvous port
RDZV_PORT = 29400  # torchrun's default port of a c10d rendezvous endpoint


class RenderError(ValueError):
    """The assignment cannot be turned into pods (a task without accelerators or image)."""


def pod_name(
    job: str, epoch: int, task: str, replica: int, attempt: int = 1, generation: int = 1
) -> str:
    """Deterministic pod name: the same assignment always renders the same names; a replica's
    later attempts (runs again in place) end in `-a<attempt>`, a service replica's pods of a
    later template generation (its rolling update's replacements) in `-g<generation>`."""
    again = f"-a{attempt}" if attempt > 1 else ""
    again += f"-g{generation}" if generation > 1 else ""
    return f"sp-{job[:8]}-e{epoch}-{task}-{replica}"[: 63 - len(again)].rstrip("-") + again


def service_name(job: str, epoch: int) -> str:
    """The headless Service of a multi-pod placement (the pods' DNS subdomain)."""
    return f"sp-{job}-e{epoch}"


def hostname(name: str, task: str, replica: int, pod: str) -> str:
    """A pod's stable hostname `<job name>-<task>-<replica>` (its pod name if that is too long)."""
    host = f"{name}-{task}-{replica}"
    return host if len(host) <= 63 else pod


def _master(assignment: Assignment) -> tuple[str, int]:
    """The task and replica whose pod is the rendezvous master: replica 0 of the first task
    with accelerators, else of the first task."""
    first = next((t for t in assignment.tasks if t.device is not None), assignment.tasks[0])
    return first.task.name, 0


def identity_env(assignment: Assignment, task: str, replica: int) -> dict[str, str]:
    """Which job, task and replica a pod runs (every pod; a service's pods get only these)."""
    return {
        "SUANPAN_JOB_ID": str(assignment.job),
        "SUANPAN_JOB_NAME": assignment.name,
        "SUANPAN_TASK": task,
        "SUANPAN_REPLICA": str(replica),
    }


def rendezvous_env(
    assignment: Assignment, task: str, replica: int, rank: int, local_world_size: int
) -> dict[str, str]:
    """What distributed frameworks read to find each other (PyTorch/torchrun, MindSpore).

    A placement whose pod count may change (elastic) has no fixed world: instead of
    `WORLD_SIZE`, the node rank and MindSpore's worker count, its pods get torchrun's elastic
    arguments (`PET_NNODES=min:max` and a c10d rendezvous on the master's stable name), and
    torchrun gives each worker its rank and world size at every rendezvous."""
    job = str(assignment.job)
    if assignment.most_replicas > 1:
        master_task, master_replica = _master(assignment)
        master_pod = pod_name(job, assignment.epoch, master_task, master_replica)
        host = hostname(assignment.name, master_task, master_replica, master_pod)
        master = f"{host}.{service_name(job, assignment.epoch)}"
    else:
        master = "localhost"
    port = str(MASTER_PORT)
    fewest, most = assignment.fewest_replicas, assignment.most_replicas
    world = str(assignment.replicas) if fewest == most else None
    env: dict[str, str | None] = {
        **identity_env(assignment, task, replica),
        "RANK": str(rank),
        "WORLD_SIZE": world,
        "LOCAL_WORLD_SIZE": str(local_world_size),
        "MASTER_ADDR": master,
        "MASTER_PORT": port,
        "PET_NNODES": world or f"{fewest}:{most}",
        "PET_NODE_RANK": str(rank) if world else None,
        "PET_NPROC_PER_NODE": str(local_world_size),
        "PET_MASTER_ADDR": master,
        "PET_MASTER_PORT": port,
        "MS_SCHED_HOST": master,
        "MS_SCHED_PORT": port,
        "MS_WORKER_NUM": str(assignment.replicas * local_world_size) if world else None,
    }
    if world is None:
        env |= {
            "PET_RDZV_BACKEND": "c10d",
            "PET_RDZV_ENDPOINT": f"{master}:{RDZV_PORT}",
            "PET_RDZV_ID": job,
        }
    return {k: v for k, v in env.items() if v is not None}


def visible_env(model: AcceleratorModel) -> dict[str, str]:
    """The variables the allocation passes from the bind's annotations (`visible-env`): each
    variable's annotation."""
    return {a.env: a.annotation for a in model.allocation if a.kind == "visible-env"}


def runtime_env(model: AcceleratorModel, option: DeviceOption) -> dict[str, str]:
    """The vendor's runtime variables (the catalog's `runtime`) for a replica on `option`: the
    collective library and its torch backend, and the framework's device selection `0..n-1`
    (the container sees only its bound devices), unless the allocation passes that variable;
    and the path of the rank table where the collective library reads one."""
    profile = model.runtime
    env = dict(profile.env)
    if profile.collective:
        env["SUANPAN_COLLECTIVE"] = profile.collective
    if profile.torch_backend:
        env["SUANPAN_DIST_BACKEND"] = profile.torch_backend
    if profile.framework_devices and profile.framework_devices not in visible_env(model):
        env[profile.framework_devices] = ",".join(map(str, range(option.count)))
    if profile.rank_table:
        env[profile.rank_table.env] = profile.rank_table.path
    return env


def device_request_annotation(option: DeviceOption) -> str:
    """The `DEVICE_REQUEST` annotation of a pod running with `option` (what the extender reads)."""
    return json.dumps(
        {"count": option.count, "milli": option.milli, "memoryMib": option.memory_mib},
        separators=(",", ":"),
    )


def cpu_only_exclusions(catalog: Catalog) -> tuple[NodeExclusion, ...]:
    """The node anti-affinity of a CPU-only pod: no node that carries a catalog accelerator."""
    return tuple(
        NodeExclusion(key, tuple(sorted(values)))
        for key, values in catalog.accelerator_node_labels().items()
    )


def render(
    assignment: Assignment,
    prefix: str,
    catalog: Catalog,
    attempts: Mapping[tuple[str, int], int] | None = None,
) -> list[PodSpec]:
    """The pods of an Active assignment, every replica of every task, in the tenant's
    namespace (`tenant_namespace(prefix, tenant)`); a replica run again in place has its
    attempt in `attempts` ((task, replica) -> attempt, 1 when absent): a pod of its own
    (`pod_name`, `ATTEMPT_LABEL`) with the same hostname, rank and environment.

    The agent's `catalog` adds what only the cluster side knows: how the vendor's plugin learns
    the extender's devices (a visible-devices variable read from the bind's annotation) and
    which node labels mark accelerator nodes (CPU-only pods avoid them unless the task is
    annotated `ACCELERATOR_NODES: allow`). A gang (assignment `gang`, more than one pod, or an
    elastic placement that may grow to more) is created behind the `GANG_GATE` scheduling gate;
    its accelerator pods carry `GANG` / `GANG_SIZE` (the pods it holds now) for the extender's
    bind. A placement that has or may grow to more than one pod gets a headless
    Service (`service_name`) as the pods' subdomain, each pod the hostname
    `<job name>-<task>-<replica>`; every container gets `rendezvous_env`, RANK counting the
    replicas of all tasks in order (each task's first rank follows the most replicas the tasks
    before it may hold, so a resize moves no pod's rank), and an accelerator pod the vendor's
    `runtime_env`; where the vendor's collective library reads a rank table, the pod mounts
    the placement's (`cluster_agents.agent.ranktable`).

    A service's shard (`assignment.service`) is no collective: its replicas are no gang (a
    shard starts as a gang of one, which needs no gate), have no headless Service, rank table
    or rendezvous variables (only `identity_env`), restart in place (`restartPolicy: Always`)
    and carry the template generation (`GENERATION_LABEL`, and in the name past the first).
    """
    job = str(assignment.job)
    namespace = tenant_namespace(prefix, assignment.tenant)
    hints = {(h.task, h.replica): h for h in assignment.hints}
    serving = assignment.service
    generation = serving.generation if serving is not None else 1
    # an elastic placement may grow: its first pods get the gang and names the later join
    several = assignment.most_replicas > 1 and serving is None
    gang = f"{job}-e{assignment.epoch}" if assignment.gang and several else ""
    binding = sum(t.task.replicas for t in assignment.tasks if t.device is not None)
    service = service_name(job, assignment.epoch) if several else ""
    pods: list[PodSpec] = []
    first_rank = 0
    for assigned in assignment.tasks:
        task, option = assigned.task, assigned.device
        requests = {"cpu": f"{task.cpu_milli}m", "memory": f"{task.memory_mib}Mi"}
        annotations = dict(task.annotations)
        tolerations: tuple[Toleration, ...] = ()
        env_from: dict[str, str] = {}
        vendor_env: dict[str, str] = {}
        avoid: tuple[NodeExclusion, ...] = ()
        table: RankTableMount | None = None
        image = task.image
        if option is None and annotations.get(ann.ACCELERATOR_NODES) != "allow":
            avoid = cpu_only_exclusions(catalog)
        if option is not None:
            requests.update(option.resources)
            annotations[ann.FLAVOR] = option.flavor
            annotations[ann.DEVICE_REQUEST] = device_request_annotation(option)
            tolerations = tuple(Toleration(t.key, t.effect) for t in option.tolerations)
            image = option.image
            model = catalog.get(option.flavor)
            if model is not None:
                env_from = visible_env(model)
                vendor_env = runtime_env(model, option)
                if model.runtime.rank_table and serving is None:
                    cm = config_map_name(job, assignment.epoch)
                    table = RankTableMount(cm, model.runtime.rank_table)
            if gang:
                annotations |= {ann.GANG: gang, ann.GANG_SIZE: str(binding)}
        if not image:
            raise RenderError(f"task {task.name!r} has no image and no accelerator option")
        for replica in range(task.replicas):
            rank = first_rank + replica
            hint = hints.get((task.name, replica))
            pod_annotations = dict(annotations)
            if hint is not None and option is not None:
                pod_annotations[ann.HINT_DEVICES] = (
                    f"{hint.node}:{','.join(map(str, hint.devices))}"
                )
            attempt = (attempts or {}).get((task.name, replica), 1)
            name = pod_name(job, assignment.epoch, task.name, replica, attempt, generation)
            first = pod_name(job, assignment.epoch, task.name, replica)
            local = option.count if option is not None else 1
            labels = {
                ann.MANAGED_LABEL: "true",
                ann.JOB_LABEL: job,
                ann.TASK_LABEL: task.name,
                ann.REPLICA_LABEL: str(replica),
                ann.EPOCH_LABEL: str(assignment.epoch),
                ann.ATTEMPT_LABEL: str(attempt),
            }
            if serving is not None:
                labels[ann.GENERATION_LABEL] = str(generation)
                env = identity_env(assignment, task.name, replica)
            else:
                env = rendezvous_env(assignment, task.name, replica, rank, local)
            pods.append(
                PodSpec(
                    name=name,
                    namespace=namespace,
                    tenant=assignment.tenant,
                    job=job,
                    epoch=assignment.epoch,
                    task=task.name,
                    replica=replica,
                    template=task.pod,
                    container=task.container,
                    image=image,
                    labels=labels,
                    annotations=pod_annotations,
                    requests=requests,
                    cpu_milli=task.pod_cpu_milli,
                    memory_mib=task.pod_memory_mib,
                    env=vendor_env | env,
                    hostname=hostname(assignment.name, task.name, replica, first)
                    if service or serving is not None
                    else "",
                    service=service,
                    tolerations=tolerations,
                    priority=assignment.priority,
                    priority_class=f"suanpan-{assignment.priority_class}",
                    scheduler_name=ann.SCHEDULER_NAME,
                    env_from_annotations=env_from,
                    avoid_nodes=avoid,
                    gang=gang,
                    gated=bool(gang),
                    rank_table=table,
                    attempt=attempt,
                    restart_policy="Always" if serving is not None else "Never",
                )
            )
        first_rank += task.ceiling
    return pods
