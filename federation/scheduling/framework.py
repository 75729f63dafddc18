"""The plugin framework of the core: typed per-job state, plugin protocols, registry, config.

Like the kube-scheduler framework, lifted to cluster granularity: cluster filters look at a
cluster alone, assignment filters at a cluster with one flavor per task, scores rank the
clusters that pass. A filter reads only the cluster state it is handed, so preemption can
hand it a trial copy. Scores are 0-100 per plugin, then weighted by `SchedulerConfig`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol

from federation.scheduling.devices import Preference
from federation.scheduling.model import Assignment, FlavorOption, Job, ReplicaPlacement
from federation.scheduling.quota import demand
from federation.scheduling.state import ClusterState, State
from federation.scheduling.status import Status

DEFAULT_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "packing": 1.0,
        "performance": 1.0,
        "locality": 1.0,
        "balance": 0.0,
        "cost": 0.0,
        "retry": 10.0,
        "live_load": 1.0,
        "growth_room": 2.0,  # above locality: an elastic job grows only where it starts
    }
)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Which plugins run, how scores weigh, and the policy knobs of the core."""

    cluster_filters: tuple[str, ...] = ("ready", "constraints")
    assignment_filters: tuple[str, ...] = ("flavor_availability", "quota", "gang_fit")
    score_weights: Mapping[str, float] = field(default_factory=lambda: DEFAULT_WEIGHTS)
    preemption: bool = True
    preemption_compare: int = 3  # clusters offering victims compared before choosing (0: all)
    flavor_order: Literal["preference", "fastest"] = "preference"
    max_assignments: int = 32  # flavor combinations tried per job and cluster
    device_preference: Preference = "pack"
    price_label: str = "suanpan.io/price"  # cluster label: price of one device-hour
    priority_aging_s: float = 0.0  # order only: +1 priority per this many seconds waited (0: off)
    backfill: bool = True  # large gangs that wait get reservations; others backfill around them
    reservations_per_queue: int = 1  # per queue, or per cohort for the queues of one
    reservation_min_devices: int = 8  # whole devices a gang needs to earn a reservation
    reservation_min_wait_s: float = 0.0  # and how long it must have waited


@dataclass(frozen=True, slots=True)
class Estimate:
    """Where the replicas of a job would go in one cluster (node and devices per replica; a
    non-gang job may list fewer replicas than it has)."""

    replicas: tuple[ReplicaPlacement, ...]
    nodes: int = 0  # distinct nodes used
    intact_nodes_broken: int = 0  # nodes whose devices were all free before


@dataclass(frozen=True, slots=True)
class Candidate:
    """A cluster that passed every filter, with the flavor assignment and estimate it got."""

    cluster: ClusterState
    assignment: Assignment
    estimate: Estimate | None


class JobContext:
    """Typed state of one job in one cycle, shared by the plugins that look at it."""

    __slots__ = (
        "_demands",
        "_keys",
        "_tolerations",
        "assignments",
        "config",
        "estimates",
        "job",
        "quota",
        "shape",
        "state",
    )

    def __init__(
        self, job: Job, state: State, config: SchedulerConfig, assignments: Sequence[Assignment]
    ) -> None:
        self.job = job
        self.state = state
        self.config = config
        self.assignments = tuple(assignments)  # in the order they are tried
        self.estimates: dict[tuple[str, Assignment], Estimate] = {}
        self._demands: dict[Assignment, dict[str, int]] = {}
        self._tolerations: dict[FlavorOption | None, frozenset[str]] = {}
        self._keys: dict[int, Hashable] = {}
        self.quota: dict[Hashable, Status] = {}  # quota answers by assignment and ledger version
        # what besides the assignment decides fit, so jobs alike share cached results
        tasks = tuple(
            (t.name, t.replicas, t.cpu_milli, t.memory_mib, t.accelerator_nodes) for t in job.tasks
        )
        self.shape: Hashable = (tasks, job.gang, job.constraints.tolerations)

    def key(self, assignment: Assignment) -> Hashable:
        """A cheap cache key for one of `assignments`: its options as plain values."""
        found = self._keys.get(id(assignment))
        if found is None:
            found = self._keys[id(assignment)] = tuple(
                None if o is None else (o.flavor, o.count, o.milli, o.memory_mib, o.tolerations)
                for o in assignment
            )
        return found

    def demand(self, assignment: Assignment) -> Mapping[str, int]:
        """Quota the job charges with `assignment`."""
        found = self._demands.get(assignment)
        if found is None:
            found = self._demands[assignment] = demand(self.job, assignment)
        return found

    def tolerations(self, option: FlavorOption | None) -> frozenset[str]:
        """Taint keys tolerated by the job together with the flavor's vendor tolerations."""
        found = self._tolerations.get(option)
        if found is None:
            extra = option.tolerations if option is not None else ()
            found = frozenset((*self.job.constraints.tolerations, *extra))
            self._tolerations[option] = found
        return found


class ClusterFilter(Protocol):
    """Decides from the cluster alone (readiness, constraints)."""

    name: str

    def filter(self, ctx: JobContext, cluster: ClusterState) -> Status:
        """SUCCESS, or why the job cannot go to `cluster`."""
        ...


class AssignmentFilter(Protocol):
    """Decides for a cluster with one flavor option per task (quota, availability, gang fit)."""

    name: str

    def filter(self, ctx: JobContext, cluster: ClusterState, assignment: Assignment) -> Status:
        """SUCCESS, or why the job cannot go to `cluster` with `assignment`."""
        ...


class ScorePlugin(Protocol):
    """Rates every feasible candidate 0-100 (higher is better)."""

    name: str

    def score(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[float]:
        """One score in 0..100 per candidate, in order."""
        ...


@dataclass(frozen=True, slots=True)
class Profile:
    """The plugins one configuration runs, built from a registry."""

    cluster_filters: tuple[ClusterFilter, ...]
    assignment_filters: tuple[AssignmentFilter, ...]
    scores: tuple[tuple[ScorePlugin, float], ...]

    def rank(self, ctx: JobContext, candidates: Sequence[Candidate]) -> list[dict[str, float]]:
        """Per candidate: each plugin's score and the weighted `total` (all 0..100)."""
        breakdown: list[dict[str, float]] = [{} for _ in candidates]
        for plugin, _ in self.scores:
            for row, value in zip(breakdown, plugin.score(ctx, candidates), strict=True):
                row[plugin.name] = round(min(max(value, 0.0), 100.0), 3)
        weight = sum(w for _, w in self.scores)
        for row in breakdown:
            total = sum(row[p.name] * w for p, w in self.scores)
            row["total"] = round(total / weight, 3) if weight else 0.0
        return breakdown


@dataclass(frozen=True, slots=True)
class Registry:
    """Plugin factories by name; `profile` builds the ones a configuration names."""

    cluster_filters: Mapping[str, Callable[[], ClusterFilter]]
    assignment_filters: Mapping[str, Callable[[], AssignmentFilter]]
    scores: Mapping[str, Callable[[], ScorePlugin]]

    def profile(self, config: SchedulerConfig) -> Profile:
        """The plugins of `config`; raises ValueError naming an unknown plugin."""
        unknown = (
            [n for n in config.cluster_filters if n not in self.cluster_filters]
            + [n for n in config.assignment_filters if n not in self.assignment_filters]
            + [n for n in config.score_weights if n not in self.scores]
        )
        if unknown:
            raise ValueError(f"unknown scheduler plugins: {', '.join(unknown)}")
        return Profile(
            tuple(self.cluster_filters[n]() for n in config.cluster_filters),
            tuple(self.assignment_filters[n]() for n in config.assignment_filters),
            tuple((self.scores[n](), w) for n, w in sorted(config.score_weights.items()) if w > 0),
        )
