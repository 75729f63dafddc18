"""Compile a validated manifest against the catalog, once, at submission (pure).

The only reader of the manifest after the API's validation. Rules, each applied here only:

- CPU is rounded up to a whole milli-core and memory up to a whole MiB; pods request exactly
  these (`1500m`, `954Mi`), so hub, quota and cluster count the same amounts.
- `anyOf` patterns expand to catalog models in the user's order, duplicates dropped; a pattern
  that matches no model, or (for a share) no model that can be shared, is an error.
- A share (`fraction`) is rounded up to the vendor's granularity: one unit of its core resource
  (1 % of a device on most vendors, 1/16 on Moore Threads) or one slot when the vendor counts
  shares (`max_shares`); a share that rounds up to the whole device asks for a whole device.
  Share memory is rounded up to the vendor's memory unit.
- The image of an option is the flavor's own, else the vendor's from `images`, else `image`
  (or, with a template, the image of the task's container).
- The short form (`image`, `command`, `args`, `env`, `annotations`) becomes a pod template of
  one container named after the task; with a `template` it is refused (give it there). The
  task's container (`container`, else the first) takes `resources.cpu`/`memory`, so it must
  not set them in its own limits; the other containers' limits count towards the pod.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from federation.catalog import AcceleratorModel, Catalog, parse_quantity
from federation.compiled import (
    CompiledAutoscaling,
    CompiledJob,
    CompiledPort,
    CompiledService,
    CompiledTask,
    CompiledToleration,
    DeviceOption,
)
from federation.podtemplate import PodTemplate
from federation.scheduling.devices import WHOLE
from federation.spec import (
    Accelerators,
    FailurePolicy,
    FlavorChoice,
    JobManifest,
    ServiceManifest,
    Task,
)

MIB = 2**20


@dataclass(frozen=True)
class CompileError(ValueError):
    """A manifest the catalog cannot serve, with the field path at fault."""

    path: str
    message: str
    expected: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def cpu_milli(value: str | int) -> int:
    """Milli-cores of a CPU quantity, rounded up."""
    return math.ceil(parse_quantity(str(value)) * 1000)


def memory_mib(value: str | int) -> int:
    """MiB of a memory quantity, rounded up."""
    return math.ceil(parse_quantity(str(value)) / MIB)


def share_milli(model: AcceleratorModel, fraction: float) -> int:
    """The share of one device of `model` a `fraction` takes, rounded up to the vendor's step."""
    share = model.sharing
    exact = Decimal(str(fraction))
    steps = share.core_units if share.core_resource else share.max_shares or WHOLE
    units = max(1, math.ceil(exact * steps))
    return min(WHOLE, math.ceil(Decimal(units * WHOLE) / steps))


def _share_memory(model: AcceleratorModel, mib: int) -> int:
    unit = max(1, model.sharing.memory_unit_mib)
    return math.ceil(mib / unit) * unit


def _resources(model: AcceleratorModel, count: int, milli: int, memory: int) -> dict[str, str]:
    """The extended resources one replica's container asks for on `model`."""
    share = model.sharing
    if milli == WHOLE:
        return {model.resource: str(count)}
    out = {share.share_resource or model.resource: "1"}
    if share.core_resource:
        out[share.core_resource] = str(math.ceil(Decimal(milli * share.core_units) / WHOLE))
    if share.memory_resource and memory:
        out[share.memory_resource] = str(memory)
    return out


def _image(task: Task, choice: FlavorChoice, model: AcceleratorModel) -> str | None:
    return choice.image or task.images.get(model.vendor) or _container_image(task)


def _container_image(task: Task) -> str | None:
    if task.template is None:
        return task.image
    name = task.container or task.template.spec.containers[0].name
    return next((c.image for c in task.template.spec.containers if c.name == name), None)


SHORT_FORM = ("image", "command", "args", "env", "annotations")


def _pod(task: Task, path: str) -> tuple[PodTemplate, str]:
    """The task's pod template and the name of its container (the short form compiled)."""
    if task.template is None:
        if task.container is not None:
            raise CompileError(f"{path}.container", "names a container of `template`", "absent")
        container = {
            "name": task.name,
            "image": task.image,
            "command": task.command or None,
            "args": task.args or None,
            "env": [{"name": k, "value": v} for k, v in task.env.items()] or None,
        }
        return PodTemplate.model_validate(
            {"metadata": {"annotations": task.annotations}, "spec": {"containers": [container]}}
        ), task.name
    for name in SHORT_FORM:
        if name in task.model_fields_set:
            raise CompileError(
                f"{path}.{name}",
                f"with `template`, give {name} in the template",
                "absent",
            )
    containers = task.template.spec.containers
    main = task.container or containers[0].name
    index = next((i for i, c in enumerate(containers) if c.name == main), None)
    if index is None:
        raise CompileError(
            f"{path}.container",
            f"no container {main!r} in template.spec.containers",
            "one of " + ", ".join(c.name for c in containers),
        )
    resources = containers[index].resources
    for name in ("cpu", "memory"):
        if resources is not None and name in resources.limits:
            raise CompileError(
                f"{path}.template.spec.containers[{index}].resources.limits.{name}",
                f"the task's container takes `resources.{name}` of the task",
                f"set spec.tasks[].resources.{name}",
            )
    return task.template, main


def _option(
    task: Task, accel: Accelerators, choice: FlavorChoice, model: AcceleratorModel, path: str
) -> DeviceOption | None:
    """The option of one model, or None when a share cannot be had on it."""
    wanted_mib = memory_mib(accel.min_memory) if accel.min_memory is not None else 0
    count = choice.count or accel.count
    milli = WHOLE
    memory = wanted_mib
    if accel.fraction is not None:
        if not model.sharing.enabled:
            return None
        if count != 1:
            raise CompileError(f"{path}.count", "a share is part of ONE device", "1 or absent")
        milli = share_milli(model, accel.fraction)
        if milli < WHOLE:
            memory = _share_memory(model, wanted_mib) if wanted_mib else 0
    image = _image(task, choice, model)
    if not image:
        raise CompileError(
            f"{path}.image",
            f"no image for {model.key}: give one here, in `images.{model.vendor.value}` "
            "or in `image`",
            "an image",
        )
    return DeviceOption(
        flavor=model.key,
        vendor=model.vendor.value,
        count=count,
        milli=milli,
        memory_mib=memory,
        speed=model.speed,
        image=image,
        resources=_resources(model, count, milli, memory),
        tolerations=tuple(CompiledToleration(key=k, effect=e) for k, e in model.tolerations),
    )


def _options(catalog: Catalog, task: Task, accel: Accelerators, path: str) -> list[DeviceOption]:
    seen: set[str] = set()
    options: list[DeviceOption] = []
    for i, choice in enumerate(accel.any_of):
        at = f"{path}.anyOf[{i}]"
        models = catalog.match(choice.flavor)
        if not models:
            raise CompileError(
                f"{at}.flavor",
                f"{choice.flavor!r} matches no accelerator model of the catalog",
                "see /v1/flavors",
            )
        found = 0
        for model in models:
            option = _option(task, accel, choice, model, at)
            if option is None:
                continue
            found += 1
            if model.key not in seen:
                seen.add(model.key)
                options.append(option)
        if not found:
            raise CompileError(
                f"{at}.flavor",
                f"no model matching {choice.flavor!r} can be shared (fraction given)",
                "a flavor whose vendor supports sharing, see /v1/flavors",
            )
    return options


def _task(catalog: Catalog, task: Task, path: str) -> CompiledTask:
    accel = task.resources.accelerators
    pod, container = _pod(task, path)
    options = _options(catalog, task, accel, f"{path}.resources.accelerators") if accel else []
    if not options and not _container_image(task):
        raise CompileError(
            f"{path}.image", "a task without accelerators needs an image", "an image"
        )
    return CompiledTask(
        name=task.name,
        replicas=task.min_replicas or task.replicas,
        min_replicas=task.min_replicas,
        max_replicas=task.max_replicas,
        cpu_milli=cpu_milli(task.resources.cpu),
        memory_mib=memory_mib(task.resources.memory),
        pod=pod,
        container=container,
        options=tuple(options),
    )


def compile_job(catalog: Catalog, manifest: JobManifest) -> CompiledJob:
    """The compiled form of a validated manifest; raises CompileError with the field path."""
    spec = manifest.spec
    return CompiledJob(
        gang=spec.gang,
        regions=tuple(spec.placement.regions),
        clusters=tuple(spec.placement.clusters),
        cluster_selector=dict(spec.placement.cluster_selector),
        max_runtime_seconds=spec.max_runtime_seconds,
        checkpoint_interval_seconds=spec.checkpoint.interval_seconds if spec.checkpoint else None,
        grace_period_seconds=spec.checkpoint.grace_period_seconds if spec.checkpoint else None,
        failover=spec.failover,
        failure_policy=spec.failure_policy or FailurePolicy(),
        tasks=tuple(_task(catalog, t, f"spec.tasks[{i}]") for i, t in enumerate(spec.tasks)),
    )


def compile_service(
    catalog: Catalog, manifest: ServiceManifest, generation: int = 1
) -> CompiledJob:
    """The compiled form of a service (the form its shards copy, `shard_form`); `generation`
    counts its template's versions. Raises CompileError with the field path."""
    spec = manifest.spec
    server = spec.server
    scaling = spec.autoscaling
    low = server.min_replicas or server.replicas
    high = server.max_replicas or server.replicas
    task = _task(catalog, server, "spec.server")
    return CompiledJob(
        gang=True,
        regions=tuple(spec.placement.regions),
        clusters=tuple(spec.placement.clusters),
        cluster_selector=dict(spec.placement.cluster_selector),
        tasks=(task.model_copy(update={"replicas": 1, "min_replicas": 1, "max_replicas": high}),),
        service=CompiledService(
            service=manifest.metadata.name,
            ports=tuple(
                CompiledPort(name=p.name, port=p.port, protocol=p.protocol) for p in spec.ports
            ),
            spread=spec.spread.clusters,
            min_replicas=low,
            max_replicas=high,
            autoscaling=(
                CompiledAutoscaling(
                    metric=scaling.metric.name,
                    target=scaling.metric.target,
                    port=scaling.metric.port or 0,
                    source=scaling.metric.source,
                    path=scaling.metric.path,
                    tolerance=scaling.tolerance,
                    up_window_s=scaling.scale_up_stabilization_seconds,
                    down_window_s=scaling.scale_down_stabilization_seconds,
                )
                if scaling is not None
                else None
            ),
            generation=generation,
        ),
    )


def shard_form(service: CompiledJob, clusters: tuple[str, ...]) -> CompiledJob:
    """The compiled job of one shard of `service`: an elastic gang of one server replica that
    grows toward the cap the service controller gives it (`jobs.replica_cap`), confined to
    `clusters` (the service's clusters less those its other shards run in)."""
    return service.model_copy(update={"clusters": clusters})
