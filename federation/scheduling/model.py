"""The frozen facts the scheduling core reads: fleet, queues, jobs, placements, snapshot.

Everything here is an immutable value. A `Snapshot` is built once per cycle by a shell (hub,
simulator, benchmark); the core copies only the usage it changes (`state.State`).

Quota resources are strings: `"cpu"` (milli-CPU), `"memory"` (MiB), a flavor key such as
`"huawei/Ascend910B3"` (milli-devices) and `"compute"` (devices x flavor speed x 1000).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from federation.scheduling.devices import WHOLE, DeviceRequest, NodeDevices

CPU = "cpu"
MEMORY = "memory"
COMPUTE = "compute"

NO_LABELS: Mapping[str, str] = MappingProxyType({})


def _no_labels() -> Mapping[str, str]:
    return NO_LABELS


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint; `NoSchedule` and `NoExecute` taints keep untolerating work off the node."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a member cluster with its allocatable and used capacity."""

    name: str
    cpu_milli: int
    memory_mib: int
    pods: int = 110
    used_cpu_milli: int = 0
    used_memory_mib: int = 0
    used_pods: int = 0
    devices: tuple[NodeDevices, ...] = ()
    labels: Mapping[str, str] = field(default_factory=_no_labels)
    taints: tuple[Taint, ...] = ()
    ready: bool = True


@dataclass(frozen=True, slots=True)
class Cluster:
    """A member cluster (one Kubernetes control plane in one data center)."""

    name: str
    region: str = ""
    zone: str = ""
    nodes: tuple[Node, ...] = ()
    labels: Mapping[str, str] = field(default_factory=_no_labels)
    ready: bool = True
    cordoned: bool = False
    accepted: bool = True  # by an administrator or the auto-accept policy: else it gets no work


@dataclass(frozen=True, slots=True)
class Quota:
    """A queue's share of one resource: `nominal`, plus up to `borrowing_limit` from its cohort
    (None: no limit beyond what the cohort has unused)."""

    nominal: int
    borrowing_limit: int | None = None


@dataclass(frozen=True, slots=True)
class Queue:
    """A tenant's queue. Resources absent from `quota` are not limited by this queue."""

    name: str
    tenant: str = ""
    cohort: str = ""  # queues of one cohort lend each other unused nominal quota
    weight: float = 1.0  # fair-share weight within the cohort
    quota: Mapping[str, Quota] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class FlavorOption:
    """One acceptable accelerator flavor for a task: `count` devices (or a `milli` share) of
    `flavor` with `memory_mib` per device; `speed` is the catalog's normalized speed."""

    flavor: str
    count: int = 1
    milli: int = WHOLE
    memory_mib: int = 0
    speed: float = 1.0
    tolerations: tuple[str, ...] = ()  # taint keys the vendor's nodes carry

    @property
    def request(self) -> DeviceRequest:
        """The per-replica device request of this option."""
        return DeviceRequest(count=self.count, milli=self.milli, memory_mib=self.memory_mib)

    @property
    def milli_devices(self) -> int:
        """Devices one replica takes, in milli-devices."""
        return self.count * self.milli


@dataclass(frozen=True, slots=True)
class AcceleratorRequest:
    """Accelerators of a task: any one of `options`, in the user's order of preference."""

    options: tuple[FlavorOption, ...]

    def option_for(self, flavor: str) -> FlavorOption | None:
        """The option naming `flavor`, if any."""
        return next((o for o in self.options if o.flavor == flavor), None)


Assignment = tuple[FlavorOption | None, ...]  # the option each task runs with (None: no devices)


@dataclass(frozen=True, slots=True)
class Elastic:
    """An elastic task's bounds: it starts with `min` replicas (a gang of them) and may hold
    any count up to `max`; `Task.replicas` is the count it starts with or holds."""

    min: int
    max: int


@dataclass(frozen=True, slots=True)
class Task:
    """A set of identical replicas (pods) of a job (`elastic`: their count may change)."""

    name: str
    replicas: int = 1
    cpu_milli: int = 0
    memory_mib: int = 0
    accelerators: AcceleratorRequest | None = None
    # without accelerators: may its replicas use nodes that carry accelerators? (off: they
    # stay on CPU nodes, as the agent's node affinity keeps their pods)
    accelerator_nodes: bool = False
    elastic: Elastic | None = None

    @property
    def floor(self) -> int:
        """The fewest replicas the task runs with."""
        return self.elastic.min if self.elastic is not None else self.replicas

    @property
    def ceiling(self) -> int:
        """The most replicas the task may hold."""
        return self.elastic.max if self.elastic is not None else self.replicas


@dataclass(frozen=True, slots=True)
class Constraints:
    """Where a job may run: empty sets mean anywhere; all selector labels must match."""

    regions: frozenset[str] = frozenset()
    clusters: frozenset[str] = frozenset()
    cluster_selector: Mapping[str, str] = field(default_factory=_no_labels)
    preferred_regions: tuple[str, ...] = ()  # soft hint for the locality score
    tolerations: tuple[str, ...] = ()  # node taint keys the job tolerates
    # clusters where this job's gang recently failed to start: others are preferred (soft)
    avoided_clusters: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Job:
    """A unit of admission: all tasks run in one cluster. A gang starts all replicas at once."""

    id: str
    queue: str
    tasks: tuple[Task, ...]
    priority: int = 0
    preemptible: bool = True
    created_at: float = 0.0  # seconds, injected by the shell
    gang: bool = True
    constraints: Constraints = Constraints()
    runtime_s: float = 0.0  # run time so far (running jobs), up to `now`
    # the longest it runs (None: unknown, never ending for the reservation estimates)
    max_runtime_s: float | None = None
    checkpoint_interval_s: float | None = None  # it checkpoints this often from its start
    since_checkpoint_s: float | None = None  # seconds since the checkpoint it last reported
    grace_s: float | None = None  # its pods' time to stop when evicted (None: the agents' default)

    @property
    def run_times_matter(self) -> bool:
        """Whether the core reads this job's run times (`runtime_s`, `since_checkpoint_s`):
        for a victim's cost (preemptible jobs) and an expected end (`max_runtime_s`). A shell
        may leave them unset otherwise; a property test holds the core to it."""
        return self.preemptible or self.max_runtime_s is not None

    @property
    def lost_s(self) -> float:
        """Seconds of work an eviction now loses: since the latest checkpoint known (one every
        `checkpoint_interval_s` from the start, or the reported one), else since the start."""
        lost = self.runtime_s
        if self.checkpoint_interval_s:
            lost = lost % self.checkpoint_interval_s
        if self.since_checkpoint_s is not None:
            lost = min(lost, max(self.since_checkpoint_s, 0.0))
        return lost

    @property
    def elastic(self) -> bool:
        """Whether some task's replica count may change."""
        return any(t.elastic is not None for t in self.tasks)

    def with_replicas(self, task: int, replicas: int) -> Job:
        """This job with task `task` holding `replicas` replicas."""
        tasks = list(self.tasks)
        tasks[task] = replace(tasks[task], replicas=replicas)
        return replace(self, tasks=tuple(tasks))

    def ends_at(self, now: float) -> float:
        """When the job is expected to end at the latest, if it started `runtime_s` before
        `now` (inf: no `max_runtime_s`); a job past its limit ends `now`."""
        if self.max_runtime_s is None:
            return math.inf
        return max(now - self.runtime_s + self.max_runtime_s, now)


@dataclass(frozen=True, slots=True)
class ReplicaPlacement:
    """Where one replica of task `task` sits: node name and device indices of the flavor."""

    task: int
    node: str
    devices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    """A job placed on a cluster with one flavor per task ("" for a task without accelerators).

    `replicas` lists the replicas whose node (and devices) are known; `epoch` fences agents.
    """

    job: Job
    cluster: str
    flavors: tuple[str, ...]
    replicas: tuple[ReplicaPlacement, ...] = ()
    epoch: int = 0
    _weight: float | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(
        cls, job: Job, cluster: str, assignment: Assignment, replicas: tuple[ReplicaPlacement, ...]
    ) -> Placement:
        """`job` on `cluster` with the flavors of `assignment` ("" for a task without)."""
        return cls(
            job, cluster, tuple(o.flavor if o is not None else "" for o in assignment), replicas
        )

    def option(self, task: int) -> FlavorOption | None:
        """The flavor option task `task` runs with (None for a task without accelerators)."""
        accelerators = self.job.tasks[task].accelerators
        if accelerators is None or not self.flavors[task]:
            return None
        return accelerators.option_for(self.flavors[task])

    def resized(
        self, task: int, replicas: int, added: tuple[ReplicaPlacement, ...] = ()
    ) -> Placement:
        """This placement with task `task` holding `replicas` replicas: the highest indices
        leave first; `added` are the known places of the replicas it gains."""
        kept: list[ReplicaPlacement] = []
        seen = 0
        for r in self.replicas:
            if r.task == task:
                seen += 1
                if seen > replicas:
                    continue
            kept.append(r)
        kept.extend(added)
        kept.sort(key=lambda r: r.task)  # stable: each task's replicas keep their order
        return Placement(
            self.job.with_replicas(task, replicas),
            self.cluster,
            self.flavors,
            tuple(kept),
            self.epoch,
        )

    def beyond(self, other: Placement) -> tuple[ReplicaPlacement, ...]:
        """The known replicas of this placement past the count `other` holds of their task
        (what a resize from this placement to `other` removes)."""
        counts = [0] * len(self.job.tasks)
        out = []
        for r in self.replicas:
            counts[r.task] += 1
            if counts[r.task] > other.job.tasks[r.task].replicas:
                out.append(r)
        return tuple(out)

    def replica(self, task: int, index: int) -> ReplicaPlacement | None:
        """Where replica `index` of task `task` is known to sit, if it is."""
        found = [r for r in self.replicas if r.task == task]
        return found[index] if index < len(found) else None

    def devices_per_replica(self, task: int) -> float:
        """Devices one replica of task `task` holds (shares count their part), else 0."""
        option = self.option(task)
        return option.milli_devices / WHOLE if option is not None else 0.0

    @property
    def lost_work(self) -> float:
        """What evicting the job now loses: `Job.lost_s` times the devices it holds (milli
        shares count their part), or times its pods when it holds no devices."""
        weight = self._weight
        if weight is None:  # computed once: victim searches ask often
            devices = pods = 0.0
            for t, task in enumerate(self.job.tasks):
                option = self.option(t)
                pods += task.replicas
                if option is not None:
                    devices += task.replicas * option.milli_devices / WHOLE
            weight = devices or pods
            object.__setattr__(self, "_weight", weight)
        return self.job.lost_s * weight


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the core knows at the start of a cycle.

    - `clusters`: nodes with usage as the clusters report it (running pods included).
    - `placements`: jobs the hub has placed (placed, dispatched, running, preempting): they count
      against quota and are the preemption candidates.
    - `reservations`: placements whose usage the clusters do not report yet, and capacity held
      for preemptors; the core subtracts them from free capacity. A reservation of a pending job
      is free for that job only.
    - `preempting`: ids of placed jobs already being evicted (never chosen again as victims).
    """

    clusters: tuple[Cluster, ...] = ()
    queues: tuple[Queue, ...] = ()
    placements: tuple[Placement, ...] = ()
    reservations: tuple[Placement, ...] = ()
    preempting: frozenset[str] = field(default_factory=frozenset)
