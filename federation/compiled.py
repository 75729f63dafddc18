"""The compiled job: the one typed form of a job after submission (pure).

`federation.compiler` builds it once, at submission, from the manifest and the catalog. It is
stored with the job; the scheduling loop turns it into the core's model without looking at the
catalog again, the store charges quota from it, and the assignment an agent receives carries
the compiled task with the option the hub chose, so the pod the agent renders, the extender's
parse of that pod and the hub's accounting are the same numbers by construction.

Units: CPU in milli-cores, memory in MiB (both rounded up once, by the compiler), devices as
`count` whole devices or one share of `milli` thousandths of a device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import cached_property
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from federation.catalog.quantity import parse_quantity
from federation.podtemplate import Container, PodTemplate, effective_request
from federation.scheduling.devices import WHOLE, DeviceRequest
from federation.scheduling.model import (
    AcceleratorRequest,
    Constraints,
    Elastic,
    FlavorOption,
    Job,
    Task,
)
from federation.scheduling.quota import demand
from federation.spec import FailoverPolicy, FailurePolicy
from federation.wire.annotations import ACCELERATOR_NODES


class _Compiled(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True
    )


class CompiledToleration(_Compiled):
    """A toleration of the vendor's node taint (operator Exists)."""

    key: str
    effect: str = "NoSchedule"


class DeviceOption(_Compiled):
    """One acceptable flavor of a task, resolved: what a replica asks for on that flavor."""

    flavor: str  # catalog key, e.g. "huawei/Ascend910B3"
    vendor: str
    count: int = Field(ge=1)  # devices per replica
    milli: int = Field(ge=1, le=WHOLE)  # thousandths of ONE device (1000: whole devices)
    memory_mib: int = Field(alias="memoryMib", ge=0)  # per device (for a share: what it takes)
    speed: float  # the catalog's normalized speed, for compute quotas and scoring
    image: str
    # extended resources one replica's container requests (and limits) on this flavor
    resources: dict[str, str]
    tolerations: tuple[CompiledToleration, ...] = ()

    @property
    def request(self) -> DeviceRequest:
        """The per-replica device request (what the extender reads back from the pod)."""
        return DeviceRequest(self.count, self.milli, self.memory_mib)

    @property
    def core(self) -> FlavorOption:
        """This option as the scheduling core models it."""
        return FlavorOption(
            flavor=self.flavor,
            count=self.count,
            milli=self.milli,
            memory_mib=self.memory_mib,
            speed=self.speed,
            tolerations=tuple(t.key for t in self.tolerations),
        )


Amount = Literal["cpu", "memory"]


def _limit(container: Container, resource: Amount, unit: Decimal) -> int:
    """A container's limit of cpu (unit 0.001: milli-cores) or memory (unit 2**20: MiB)."""
    value = container.resources.limits.get(resource) if container.resources else None
    return math.ceil(parse_quantity(str(value)) / unit) if value is not None else 0


def pod_amount(
    pod: PodTemplate, main: str, main_amount: int, resource: Amount, unit: Decimal
) -> int:
    """What the whole pod requests of cpu or memory, by Kubernetes' rule: the containers and
    sidecars together, or an init container with the sidecars started before it if larger."""

    def amount(c: Container) -> int:
        return main_amount if c.name == main else _limit(c, resource, unit)

    return effective_request(
        map(amount, pod.spec.containers),
        ((amount(c), c.restart_policy == "Always") for c in pod.spec.init_containers or []),
    )


class CompiledTask(_Compiled):
    """One role of a job: its replicas, resources, flavor options and how to launch it.

    `pod` is the task's pod template (the short form `image/command/args/env` compiled into
    one), `container` the name of its container that gets `cpuMilli`, `memoryMib` and the
    devices of the chosen option; its image is the one without accelerators.
    """

    name: str
    replicas: int = Field(ge=1)  # fixed; elastic: the count it starts with or holds
    # None: fixed, and left out of the form, so that an agent from before elastic jobs (which
    # forbids unknown fields) still reads every fixed job's assignment during an upgrade
    min_replicas: int | None = Field(
        default=None, alias="minReplicas", ge=1, exclude_if=lambda v: v is None
    )
    max_replicas: int | None = Field(
        default=None, alias="maxReplicas", ge=1, exclude_if=lambda v: v is None
    )
    cpu_milli: int = Field(alias="cpuMilli", ge=1)  # of `container`
    memory_mib: int = Field(alias="memoryMib", ge=1)  # of `container`
    pod: PodTemplate
    container: str
    options: tuple[DeviceOption, ...] = ()  # empty: no accelerators; else in preference order

    @property
    def annotations(self) -> dict[str, str]:
        """The pod annotations the user gave."""
        return self.pod.metadata.annotations

    @property
    def image(self) -> str | None:
        """The image of `container` without accelerators."""
        return next(c.image for c in self.pod.spec.containers if c.name == self.container)

    @property
    def pod_cpu_milli(self) -> int:
        """Milli-cores the whole pod requests (sidecars and init containers included)."""
        return pod_amount(self.pod, self.container, self.cpu_milli, "cpu", Decimal("0.001"))

    @property
    def pod_memory_mib(self) -> int:
        """MiB the whole pod requests (sidecars and init containers included)."""
        return pod_amount(self.pod, self.container, self.memory_mib, "memory", Decimal(2**20))

    @property
    def floor(self) -> int:
        """The fewest replicas the task runs with."""
        return self.min_replicas or self.replicas

    @property
    def ceiling(self) -> int:
        """The most replicas the task may hold."""
        return self.max_replicas or self.replicas

    def option(self, flavor: str | None) -> DeviceOption | None:
        """The option for `flavor` (None for a task without accelerators or no flavor)."""
        if not flavor:
            return None
        return next((o for o in self.options if o.flavor == flavor), None)

    @property
    def core(self) -> Task:
        """This task as the scheduling core models it."""
        return Task(
            name=self.name,
            replicas=self.replicas,
            cpu_milli=self.pod_cpu_milli,
            memory_mib=self.pod_memory_mib,
            accelerators=(
                AcceleratorRequest(tuple(o.core for o in self.options)) if self.options else None
            ),
            accelerator_nodes=self.annotations.get(ACCELERATOR_NODES) == "allow",
            elastic=Elastic(self.floor, self.ceiling) if self.max_replicas is not None else None,
        )


class CompiledPort(_Compiled):
    """A port of a service, exposed in every cluster it runs in."""

    name: str
    port: int
    protocol: str = "TCP"


class CompiledAutoscaling(_Compiled):
    """The metric a service scales by and the autoscaler's windows (`spec.Autoscaling`)."""

    metric: str
    target: float
    port: int = 0  # of the pods' metric page (0: the devices' utilization)
    path: str = "/metrics"
    # pods: a gauge the pods serve; devices: their devices' utilization, from the exporters
    # (left out for pods: an agent from before reads it)
    source: Literal["pods", "devices"] = Field(default="pods", exclude_if=lambda v: v == "pods")
    tolerance: float = 0.1
    up_window_s: int = Field(default=0, alias="upWindowS")
    down_window_s: int = Field(default=300, alias="downWindowS")


class CompiledService(_Compiled):
    """What makes a job a shard of a service: its pods are a Deployment-like set that runs
    until deleted (restarted in place, never a gang beyond the first replica), exposed on
    `ports` by a Service in the member cluster, and the replicas the hub wants of the whole
    service lie between `min_replicas` and `max_replicas` (equal without autoscaling)."""

    service: str  # the service's name (its shards are jobs `<name>-<shard>`)
    ports: tuple[CompiledPort, ...]
    spread: int = 1
    min_replicas: int = Field(alias="minReplicas", ge=1)
    max_replicas: int = Field(alias="maxReplicas", ge=1)
    autoscaling: CompiledAutoscaling | None = None
    generation: int = 1  # of the template: an update rolls the pods of an older one over


class CompiledJob(_Compiled):
    """A whole job, compiled against the catalog at submission."""

    version: Literal[2] = 2  # 2: tasks carry a pod template
    gang: bool = True
    regions: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    cluster_selector: dict[str, str] = Field(default_factory=dict, alias="clusterSelector")
    max_runtime_seconds: int | None = Field(default=None, alias="maxRuntimeSeconds")
    checkpoint_interval_seconds: int | None = Field(default=None, alias="checkpointIntervalSeconds")
    grace_period_seconds: int | None = Field(default=None, alias="gracePeriodSeconds")
    failover: FailoverPolicy | None = None  # None: the fleet's default (hub configuration)
    # retries in place and what a lost node or cluster does (defaults for jobs stored before)
    failure_policy: FailurePolicy = Field(default_factory=FailurePolicy, alias="failurePolicy")
    tasks: tuple[CompiledTask, ...]
    # a shard of a service (left out for batch jobs: an agent from before services reads them)
    service: CompiledService | None = Field(default=None, exclude_if=lambda v: v is None)

    def task(self, name: str) -> CompiledTask | None:
        """The task called `name`."""
        return next((t for t in self.tasks if t.name == name), None)

    @property
    def replicas(self) -> int:
        """Pods of one placement of the job."""
        return sum(t.replicas for t in self.tasks)

    def holding(self, replicas: Mapping[str, int]) -> tuple[CompiledTask, ...]:
        """The tasks with the replica counts a placement holds (`held_replicas`)."""
        return tuple(
            t.model_copy(update={"replicas": replicas[t.name]}) if t.name in replicas else t
            for t in self.tasks
        )

    def core_tasks(self) -> tuple[Task, ...]:
        """The tasks as the scheduling core models them."""
        return tuple(t.core for t in self.tasks)

    @cached_property
    def _constraints(self) -> Constraints:
        return Constraints(
            regions=frozenset(self.regions),
            clusters=frozenset(self.clusters),
            cluster_selector=MappingProxyType(dict(self.cluster_selector)),
        )

    def constraints(self, avoided: frozenset[str] = frozenset()) -> Constraints:
        """Where the job may run, plus the clusters it should avoid (soft)."""
        if not avoided:
            return self._constraints
        return replace(self._constraints, avoided_clusters=avoided)


@dataclass(frozen=True)
class JobFacts:
    """The stored facts of a job the core needs besides its compiled form."""

    id: str
    queue: str  # "<tenant>/<queue>"
    priority: int
    preemptible: bool
    created_at: float
    runtime_s: float = 0.0  # since its current run started (0: not started)
    since_checkpoint_s: float | None = None  # since the checkpoint it last reported
    avoided_clusters: frozenset[str] = frozenset()  # where its gang recently failed to start


def core_job(compiled: CompiledJob, facts: JobFacts, tasks: tuple[Task, ...] | None = None) -> Job:
    """The job as the scheduling core's `Job` (`tasks`: already converted, e.g. cached)."""
    return Job(
        id=facts.id,
        queue=facts.queue,
        tasks=tasks if tasks is not None else compiled.core_tasks(),
        priority=facts.priority,
        preemptible=facts.preemptible,
        created_at=facts.created_at,
        gang=compiled.gang,
        constraints=compiled.constraints(facts.avoided_clusters),
        runtime_s=facts.runtime_s,
        max_runtime_s=compiled.max_runtime_seconds,
        checkpoint_interval_s=compiled.checkpoint_interval_seconds,
        since_checkpoint_s=facts.since_checkpoint_s,
        grace_s=compiled.grace_period_seconds,
    )


def held_replicas(assignment: Mapping[str, object]) -> dict[str, int]:
    """The replica counts a stored placement assignment holds per elastic task it resized
    (`{"replicas": {task: count}}`; tasks absent hold their compiled count)."""
    counts = assignment.get("replicas")
    return {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else {}


def chosen_options(
    compiled: CompiledJob, flavors: Mapping[str, str | None]
) -> tuple[FlavorOption | None, ...]:
    """Per task, the core option of the flavor a placement chose (None: no accelerators)."""
    out: list[FlavorOption | None] = []
    for task in compiled.tasks:
        option = task.option(flavors.get(task.name))
        out.append(option.core if option is not None else None)
    return tuple(out)


def quota_charge(
    compiled: CompiledJob,
    flavors: Mapping[str, str | None],
    replicas: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """What the job charges against its queue's quota on these flavors (the core's rule),
    holding `replicas` (`held_replicas`: elastic tasks it resized)."""
    job = Job(id="", queue="", tasks=tuple(t.core for t in compiled.holding(replicas or {})))
    return demand(job, chosen_options(compiled, flavors))
