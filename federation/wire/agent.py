"""The agent protocol: what a member cluster's agent sends up and receives down.

Agents dial out to the hub. They register, push inventory (a full snapshot on connect, deltas
after, each with a generation), long-poll assignments resumable by revision, and report
status in acknowledged batches. Every message is idempotent: replays change nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from federation.compiled import CompiledJob, CompiledService, CompiledTask, DeviceOption
from federation.k8s_names import DnsLabel, Labels, LabelValue
from federation.scheduling.devices import NodeDevices
from federation.spec import FailoverPolicy, FailurePolicy
from federation.validation import INT32_MAX, INT64_MAX, NUL_FREE

MAX_NODES_PER_REPORT = 10_000
MAX_STATUS_PER_REPORT = 5_000

Name = Annotated[str, StringConstraints(min_length=1, max_length=253), NUL_FREE]
Short = Annotated[str, StringConstraints(max_length=64), NUL_FREE]
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]  # an `integer` column
Amount = Annotated[int, Field(ge=0, le=INT64_MAX)]  # a `bigint` column


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class BootstrapRedemption(_Msg):
    """The agent's first call: its cluster's single-use bootstrap token (not a bearer token)."""

    cluster: DnsLabel
    token: Annotated[str, StringConstraints(min_length=1, max_length=128), NUL_FREE]


class AgentCredential(_Msg):
    """The cluster's own credential (a bearer token from then on) and when it expires; the
    agent stores it and renews it before then."""

    token: str
    expires_at: datetime = Field(alias="expiresAt")


class Registration(_Msg):
    """Who the agent is: sent on every (re)connect."""

    cluster: DnsLabel
    region: LabelValue = ""
    zone: LabelValue = ""
    labels: Labels = Field(default_factory=dict)
    kubernetes_version: Short = Field(default="", alias="kubernetesVersion")
    agent_version: Short = Field(default="", alias="agentVersion")


class RegistrationReply(_Msg):
    """The hub's view of the cluster; a generation behind the agent's means "send a full"."""

    cluster: str
    inventory_generation: int = Field(alias="inventoryGeneration")
    heartbeat_interval_s: float = Field(alias="heartbeatIntervalS")  # lease renewal period
    lease_s: float = Field(default=8.0, alias="leaseS", gt=0)
    gang_timeout_s: float = Field(default=120.0, alias="gangTimeoutS", gt=0)


class LeaseRenewal(_Msg):
    """The agent renews its cluster's lease and says whether it reaches its kube-apiserver
    (its list and watch are current); `problem` says why not."""

    apiserver_reachable: bool = Field(alias="apiserverReachable")
    problem: Annotated[str, StringConstraints(max_length=512)] = ""


class LeaseReply(_Msg):
    """How long the lease now lasts, and how often to renew it."""

    lease_s: float = Field(alias="leaseS", gt=0)
    renew_s: float = Field(alias="renewS", gt=0)


class Taint(_Msg):
    """A node taint."""

    key: Name
    value: Annotated[str, StringConstraints(max_length=253), NUL_FREE] = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class DeviceInfo(_Msg):
    """One accelerator of a node, resolved through the catalog, with its current use."""

    flavor: Annotated[str, StringConstraints(max_length=128), NUL_FREE]
    index: int = Field(ge=0, le=1023)
    memory_mib: Amount = Field(alias="memoryMib")
    healthy: bool = True
    used_milli: int = Field(default=0, alias="usedMilli", ge=0, le=1000)
    used_memory_mib: Amount = Field(default=0, alias="usedMemoryMib")


def device_infos(devices: NodeDevices) -> list[DeviceInfo]:
    """One node's devices of one model, with their use, as the agent reports them."""
    return [
        DeviceInfo(
            flavor=devices.model,
            index=i,
            memory_mib=devices.memory_mib[i],
            healthy=devices.healthy[i],
            used_milli=devices.used_milli[i],
            used_memory_mib=devices.used_memory_mib[i],
        )
        for i in range(devices.size)
    ]


class NodeInfo(_Msg):
    """A node: allocatable and used capacity (all pods, not only Suanpan's), health, devices."""

    name: Name
    labels: dict[
        Annotated[str, StringConstraints(max_length=317), NUL_FREE],
        Annotated[str, StringConstraints(max_length=63), NUL_FREE],
    ] = Field(default_factory=dict, max_length=1024)
    taints: list[Taint] = Field(default_factory=list, max_length=64)
    ready: bool = True
    unschedulable: bool = False
    cpu_milli: Amount = Field(alias="cpuMilli")
    memory_mib: Amount = Field(alias="memoryMib")
    pods: Count = 110
    used_cpu_milli: Amount = Field(default=0, alias="usedCpuMilli")
    used_memory_mib: Amount = Field(default=0, alias="usedMemoryMib")
    used_pods: Count = Field(default=0, alias="usedPods")
    devices: list[DeviceInfo] = Field(default_factory=list, max_length=1024)


class InventoryReport(_Msg):
    """A full snapshot (`full`: nodes not listed are gone) or a delta (upserts + removals)."""

    generation: int = Field(ge=1, le=INT64_MAX)
    full: bool
    nodes: list[NodeInfo] = Field(default_factory=list, max_length=MAX_NODES_PER_REPORT)
    removed: list[Name] = Field(default_factory=list, max_length=MAX_NODES_PER_REPORT)


class InventoryAck(_Msg):
    """The generation the hub now holds; `resync` asks for a full snapshot (a gap was seen)."""

    generation: int
    resync: bool = False


class ReplicaHint(_Msg):
    """The hub's estimate of where one replica fits (the extender decides for real)."""

    task: str
    replica: int
    node: str
    devices: list[int] = Field(default_factory=list)


class AssignedTask(_Msg):
    """A compiled task and the option the hub chose for it (None: no accelerators)."""

    task: CompiledTask
    device: DeviceOption | None = None

    @property
    def flavor(self) -> str | None:
        """The chosen catalog flavor."""
        return self.device.flavor if self.device is not None else None


def assigned_tasks(
    compiled: CompiledJob,
    flavors: Mapping[str, str | None],
    replicas: Mapping[str, int] | None = None,
) -> list[AssignedTask]:
    """The compiled tasks of a job with the options of the flavors its placement chose and
    the replica counts it holds (elastic tasks it resized)."""
    return [
        AssignedTask(task=t, device=t.option(flavors.get(t.name)))
        for t in compiled.holding(replicas or {})
    ]


class Assignment(_Msg):
    """A placement the agent must realize (`Active`) or tear down (`Released`)."""

    job: uuid.UUID
    name: str
    tenant: str
    epoch: int
    revision: int
    state: Literal["Active", "Released"]
    priority: int
    priority_class: str = Field(alias="priorityClass")
    preemptible: bool
    gang: bool
    failover: FailoverPolicy = "fast"  # the job's, or the fleet's default
    failure_policy: FailurePolicy = Field(default_factory=FailurePolicy, alias="failurePolicy")
    # SIGTERM to SIGKILL when its pods are deleted (the job's `checkpoint.gracePeriodSeconds`;
    # None: the agent's default)
    grace_period_seconds: int | None = Field(default=None, alias="gracePeriodSeconds")
    tasks: list[AssignedTask]
    hints: list[ReplicaHint] = Field(default_factory=list)
    # a service's shard: its pods restart in place, sit behind a Service on these ports, roll
    # over to a newer template generation, and their scaling metric is read (None: a batch job)
    service: CompiledService | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def replicas(self) -> int:
        """Pods of this placement."""
        return sum(t.task.replicas for t in self.tasks)

    @property
    def fewest_replicas(self) -> int:
        """Pods this placement runs with at the least (elastic tasks at their minimum)."""
        return sum(t.task.floor for t in self.tasks)

    @property
    def most_replicas(self) -> int:
        """Pods this placement may come to hold (elastic tasks at their maximum)."""
        return sum(t.task.ceiling for t in self.tasks)

    def holds(self, task: str, replica: int) -> bool:
        """Whether replica `replica` of task `task` belongs to this placement now (a resize
        removes the highest indexes)."""
        return any(t.task.name == task and replica < t.task.replicas for t in self.tasks)


class AssignmentBatch(_Msg):
    """Assignments changed after the agent's revision, and the revision to resume from."""

    revision: int
    items: list[Assignment]


JobReport = Literal["Applied", "Running", "Succeeded", "Failed", "Evicted", "Unschedulable"]


PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]
Reason = Annotated[str, StringConstraints(max_length=63), NUL_FREE]
REPLICA_MESSAGE_MAX = 1024
ReplicaMessage = Annotated[str, StringConstraints(max_length=REPLICA_MESSAGE_MAX), NUL_FREE]
MAX_REPLICAS_PER_UPDATE = 16 * 1024  # tasks x replicas of the largest job
ExitCode = Annotated[int, Field(ge=-(2**31), le=INT32_MAX)]  # a container's, as Kubernetes'


# a Pending replica's reason when its cluster's scheduler finds no node for it (PodScheduled
# False, not held by a gate)
UNSCHEDULABLE = "Unschedulable"


class ReplicaFailure(_Msg):
    """How an earlier attempt of a replica ended, once a later attempt replaced it."""

    attempt: int = Field(ge=1, le=INT32_MAX)
    pod: Name
    node: Annotated[str, StringConstraints(max_length=253), NUL_FREE] = ""
    exit_code: ExitCode | None = Field(default=None, alias="exitCode")
    reason: Reason = ""
    message: ReplicaMessage = ""


class ReplicaStatus(_Msg):
    """One replica's current pod (its latest attempt) as the cluster reports it; `last` is the
    failure of the attempt it replaced, if any."""

    task: DnsLabel
    replica: int = Field(ge=0, le=INT32_MAX)
    attempt: int = Field(default=1, ge=1, le=INT32_MAX)
    pod: Name
    node: Annotated[str, StringConstraints(max_length=253), NUL_FREE] = ""
    phase: PodPhase
    exit_code: ExitCode | None = Field(default=None, alias="exitCode")
    reason: Reason = ""
    restarts: Count = 0
    message: ReplicaMessage = ""
    last: ReplicaFailure | None = None


class EndpointPort(_Msg):
    """A port of a service shard's in-cluster Service."""

    name: DnsLabel
    port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"


class ServingStatus(_Msg):
    """A service shard as its cluster serves it: the in-cluster Service in front of its pods,
    how many replicas are ready (and of those, how many run the current template
    generation), and the sum of the scaling metric over the ready replicas that served it."""

    address: Annotated[str, StringConstraints(max_length=253), NUL_FREE]  # in-cluster DNS name
    cluster_ip: Annotated[str, StringConstraints(max_length=45), NUL_FREE] = Field(
        default="", alias="clusterIP"
    )
    ports: list[EndpointPort] = Field(default_factory=list, max_length=16)
    ready: Count = 0
    updated: Count = 0  # ready replicas on `generation`
    generation: int = Field(default=1, ge=1, le=INT64_MAX)  # the template generation applied
    metric_sum: float | None = Field(default=None, alias="metricSum", ge=0, le=1e15)
    sampled: Count = 0  # ready replicas whose metric was read into `metric_sum`


class StatusUpdate(_Msg):
    """What happened to one placement's pods in the cluster (`replicas`: each replica's
    latest pod; sent with every update, so the hub keeps the latest)."""

    job: uuid.UUID
    epoch: int = Field(ge=1, le=INT64_MAX)
    state: JobReport
    reason: Annotated[str, StringConstraints(max_length=63), NUL_FREE] = ""
    message: Annotated[str, StringConstraints(max_length=2048), NUL_FREE] = ""
    running: Count = 0
    succeeded: Count = 0
    failed: Count = 0
    replicas: list[ReplicaStatus] = Field(default_factory=list, max_length=MAX_REPLICAS_PER_UPDATE)
    # a service shard's endpoint and readiness (left out for batch jobs)
    serving: ServingStatus | None = Field(default=None, exclude_if=lambda v: v is None)


class StatusReport(_Msg):
    """A batch of status updates."""

    updates: list[StatusUpdate] = Field(max_length=MAX_STATUS_PER_REPORT)


class StatusAck(_Msg):
    """How many updates changed something, were already known, or named a stale epoch."""

    applied: int
    duplicate: int
    stale: int
