"""What a cycle decides: placed, preempted, pending (with a reason per cluster, and the
reservations of some), rejected."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from federation.scheduling.model import Job, Placement
from federation.scheduling.status import Code, Status

if TYPE_CHECKING:
    from federation.scheduling.parking import Parked


@dataclass(frozen=True, slots=True)
class Placed:
    """A job placed on a cluster: flavors per task, per replica node and devices (an estimate
    the cluster's extender refines), and the score breakdown that chose the cluster."""

    placement: Placement
    scores: Mapping[str, float]  # plugin name -> 0..100, plus "total"

    @property
    def reason(self) -> str:
        """The winning score in words."""
        parts = ", ".join(f"{k} {v:g}" for k, v in sorted(self.scores.items()) if k != "total")
        return f"{self.placement.cluster}: score {self.scores.get('total', 0):g} ({parts})"


@dataclass(frozen=True, slots=True)
class Resized:
    """A placed elastic job's new replica counts: `placement` replaces `before` (same epoch;
    replicas leave highest index first, joining ones come with their estimated place)."""

    before: Placement
    placement: Placement
    reason: str

    @property
    def counts(self) -> dict[str, tuple[int, int]]:
        """Per task whose count changed: (held before, held now)."""
        return {
            old.name: (old.replicas, new.replicas)
            for old, new in zip(self.before.job.tasks, self.placement.job.tasks, strict=True)
            if old.replicas != new.replicas
        }

    @property
    def message(self) -> str:
        """The change and its reason in words."""
        changes = ", ".join(f"{t} {a} -> {b}" for t, (a, b) in self.counts.items())
        return f"{changes} replicas: {self.reason}"


@dataclass(frozen=True, slots=True)
class Preempted:
    """Victims evicted and elastic jobs shrunk (`shrunk`) so that `preemptor` fits;
    `reservation` holds the freed capacity for it (the shell passes it back as a snapshot
    reservation until the preemptor is placed)."""

    preemptor: Job
    victims: tuple[Placement, ...]
    reservation: Placement
    reason: str
    shrunk: tuple[Resized, ...] = ()


@dataclass(frozen=True, slots=True)
class Reserved:
    """A waiting gang's reservation: where it is expected to run (`placement`: node and devices
    per replica) from `start`, when the running jobs it waits for end at the latest by their
    `max_runtime_s` (`relies_on`). Recomputed every cycle; lower-ranked jobs may use the
    capacity only if they end by `start`."""

    placement: Placement
    start: float
    relies_on: tuple[str, ...]

    @property
    def reason(self) -> str:
        """The reservation in words."""
        return f"reserved on {self.placement.cluster}, expected start {self.start:.0f}"


@dataclass(frozen=True, slots=True)
class Pending:
    """A job left waiting, with the first failing filter per cluster."""

    job: Job
    reasons: Mapping[str, Status]  # cluster name -> status

    @property
    def message(self) -> str:
        """kube-scheduler style summary: "0/3 clusters available: a: ...; b: ..."."""
        detail = "; ".join(f"{c}: {s}" for c, s in self.reasons.items())
        return f"0/{len(self.reasons)} clusters available: {detail}"


@dataclass(frozen=True, slots=True)
class Rejected:
    """A job that can never run in this fleet (unresolvable everywhere, or invalid)."""

    job: Job
    reasons: Mapping[str, Status]

    @property
    def message(self) -> str:
        """Every cluster's reason in one line."""
        return "; ".join(f"{c}: {s}" for c, s in self.reasons.items())


@dataclass(frozen=True, slots=True)
class CycleResult:
    """Everything one call of `schedule` decided."""

    placed: tuple[Placed, ...] = ()
    preempted: tuple[Preempted, ...] = ()
    pending: tuple[Pending, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    reserved: tuple[Reserved, ...] = ()  # of jobs in `pending`
    grown: tuple[Resized, ...] = ()  # elastic jobs grown into capacity nothing waits for
    scaled_in: tuple[Resized, ...] = ()  # elastic jobs shrunk to their ceiling, first of all
    # jobs left parked for the next cycle (`parking.py`): pass it to the next `schedule`
    parked: Parked | None = field(default=None, compare=False, repr=False)

    @property
    def resized(self) -> tuple[Resized, ...]:
        """Every resize in the order the cycle made them (one job may be scaled in, then
        shrunk for a preemptor: each step starts from the one before)."""
        shrunk = (r for p in self.preempted for r in p.shrunk)
        return (*self.scaled_in, *shrunk, *self.grown)

    def pending_reason(self, job_id: str, cluster: str) -> Status | None:
        """The status that kept `job_id` out of `cluster`, if it is pending."""
        for pending in self.pending:
            if pending.job.id == job_id:
                return pending.reasons.get(cluster)
        return None


def unresolvable_everywhere(reasons: Mapping[str, Status]) -> bool:
    """True when some cluster was asked and every one answered UNRESOLVABLE."""
    return bool(reasons) and all(s.code is Code.UNRESOLVABLE for s in reasons.values())
