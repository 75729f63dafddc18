"""What a placement's pods add up to, as the one status the hub needs, and which replicas
run again in place after a failure (pure).

A replica's pods are its attempts (`PodStatus.attempt`, 1 and up); only its latest counts. A
latest attempt that failed for a reason of its own (not a lost node: that is the placement's
fate, see `LOST_REASONS`) is run again as the next attempt while its failures do not exceed
the job's `backoffLimit`; after that the placement is Failed. A service's replica may have
pods of two template generations during its rolling update: the newer one counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cluster_agents.agent.backend import PodStatus
from federation.wire.agent import (
    REPLICA_MESSAGE_MAX,
    UNSCHEDULABLE,
    ReplicaFailure,
    ReplicaStatus,
)

LOST_REASONS = frozenset({"NodeLost", "Evicted", "Preempted", "Terminated"})
# PodScheduled=False reasons that mean the cluster cannot place the pod now: no node fits, or
# the scheduler itself fails (an extender unreachable, say)
WAITING_REASONS = frozenset({UNSCHEDULABLE, "SchedulerError"})


ReplicaKey = tuple[str, int, str, int]  # job, epoch, task, replica


def latest(pods: Iterable[PodStatus]) -> dict[ReplicaKey, PodStatus]:
    """Each replica's latest pod among `pods`: of its newest generation, its latest attempt."""
    out: dict[ReplicaKey, PodStatus] = {}
    for pod in pods:
        key = (pod.job, pod.epoch, pod.task, pod.replica)
        if key not in out or (out[key].generation, out[key].attempt) < (
            pod.generation,
            pod.attempt,
        ):
            out[key] = pod
    return out


def _failed_on_its_own(pod: PodStatus) -> bool:
    """A pod that failed for a reason of its own (not lost with its node)."""
    return pod.phase == "Failed" and pod.reason not in LOST_REASONS


def next_attempt(pod: PodStatus | None, backoff_limit: int) -> int:
    """The attempt a replica whose latest pod is `pod` (None: none yet) should run: the next
    one after a failure of its own while its failures do not exceed `backoff_limit`."""
    if pod is None:
        return 1
    if _failed_on_its_own(pod) and pod.attempt <= backoff_limit:
        return pod.attempt + 1
    return pod.attempt


def _said(pod: PodStatus) -> dict[str, Any]:
    """What a replica's status and a failure record both tell of `pod`."""
    return {
        "attempt": pod.attempt,
        "pod": pod.name,
        "node": pod.node,
        "exit_code": pod.exit_code,
        "message": pod.message[:REPLICA_MESSAGE_MAX],
    }


def _failure(pod: PodStatus) -> ReplicaFailure:
    return ReplicaFailure(**_said(pod), reason=(pod.reason or "Error")[:63])


def replica_statuses(pods: Iterable[PodStatus]) -> list[ReplicaStatus]:
    """The status of each replica's latest pod among one placement's `pods`, with the failure
    of the attempt it replaced while that pod is kept (for its logs)."""
    attempts = {(p.task, p.replica, p.generation, p.attempt): p for p in pods}
    out = []
    for pod in sorted(latest(attempts.values()).values(), key=lambda p: (p.task, p.replica)):
        before = attempts.get((pod.task, pod.replica, pod.generation, pod.attempt - 1))
        out.append(
            ReplicaStatus(
                **_said(pod),
                task=pod.task,
                replica=pod.replica,
                phase=pod.phase,
                reason=pod.reason[:63],
                restarts=pod.restarts,
                last=_failure(before) if before is not None and before.phase == "Failed" else None,
            )
        )
    return out


@dataclass(frozen=True)
class Summary:
    """A placement's state from its pods: `state` is a `JobReport` or "" (nothing to say)."""

    state: str
    reason: str = ""
    message: str = ""
    running: int = 0
    succeeded: int = 0
    failed: int = 0


def summarize(
    pods: Sequence[PodStatus],
    expected: int,
    *,
    now: float,
    gang_timeout_s: float,
    fewest: int | None = None,
    serving: bool = False,
) -> Summary:
    """Aggregate the pods of one (job, epoch) that should have `expected` replicas, each
    counted by its latest attempt; it runs once `fewest` of them run (an elastic placement's
    minimum: replicas it grew by may still wait for a node; default all). A service's shard
    (`serving`) runs once one of its pods is ready, and never succeeds.

    Failed wins (with the first real reason), then lost pods (node gone: run again elsewhere),
    then all succeeded, then enough running; pods pending past the gang timeout make the
    placement Unschedulable (with the scheduler's message); otherwise the pods exist and the
    placement is Applied, with reason Unschedulable and the scheduler's message ("0/3 nodes
    are available: ...") while a pod waits for a node.
    """
    serves = serving and any(p.ready for p in pods)  # an older generation's pod counts too
    pods = list(latest(pods).values())
    running = sum(p.phase == "Running" for p in pods)
    succeeded = sum(p.phase == "Succeeded" for p in pods)
    failed_pods = [p for p in pods if p.phase == "Failed"]

    def summary(state: str, reason: str = "", message: str = "") -> Summary:
        return Summary(state, reason, message, running, succeeded, len(failed_pods))

    lost = [p for p in failed_pods if p.reason in LOST_REASONS]
    real = [p for p in failed_pods if _failed_on_its_own(p)]
    if real:
        first = real[0]
        tried = f" (attempt {first.attempt})" if first.attempt > 1 else ""
        return summary(
            "Failed", first.reason or "Error", f"pod {first.name}{tried}: {first.message}"
        )
    if lost:
        return summary("Evicted", lost[0].reason, f"pod {lost[0].name} lost")
    if len(pods) < expected:
        return summary("")
    if serving:
        if serves:
            return summary("Running")
    elif succeeded == expected:
        return summary("Succeeded")
    elif running and running + succeeded >= (expected if fewest is None else fewest):
        return summary("Running")
    waiting = [p for p in pods if p.phase == "Pending" and p.reason in WAITING_REASONS]
    stuck = [p for p in pods if p.phase == "Pending" and now - p.created_at > gang_timeout_s]
    if stuck:
        why = (waiting or stuck)[0]
        said = f": {why.message}" if why.message else ""
        return summary(
            "Unschedulable",
            why.reason or UNSCHEDULABLE,
            f"{len(stuck)}/{expected} pods not running after {gang_timeout_s:g} s{said}",
        )
    if waiting:
        return summary("Applied", waiting[0].reason, waiting[0].message)
    return summary("Applied")
