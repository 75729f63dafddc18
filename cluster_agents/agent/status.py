"""What a placement's pods add up to, as the one status the hub needs (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cluster_agents.agent.backend import PodStatus

LOST_REASONS = frozenset({"NodeLost", "Evicted", "Preempted", "Terminated"})
UNSCHEDULABLE = "Unschedulable"  # PodScheduled=False because no node fits (not a gate)
# PodScheduled=False reasons that mean the cluster cannot place the pod now: no node fits, or
# the scheduler itself fails (an extender unreachable, say)
WAITING_REASONS = frozenset({UNSCHEDULABLE, "SchedulerError"})


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
    pods: Sequence[PodStatus], expected: int, *, now: float, gang_timeout_s: float
) -> Summary:
    """Aggregate the pods of one (job, epoch) that should have `expected` pods.

    Failed wins (with the first real reason), then lost pods (node gone: run again elsewhere),
    then all succeeded, then all running; pods pending past the gang timeout make the
    placement Unschedulable (with the scheduler's message); otherwise the pods exist and the
    placement is Applied, with reason Unschedulable and the scheduler's message ("0/3 nodes
    are available: ...") while a pod waits for a node.
    """
    running = sum(p.phase == "Running" for p in pods)
    succeeded = sum(p.phase == "Succeeded" for p in pods)
    failed_pods = [p for p in pods if p.phase == "Failed"]

    def summary(state: str, reason: str = "", message: str = "") -> Summary:
        return Summary(state, reason, message, running, succeeded, len(failed_pods))

    lost = [p for p in failed_pods if p.reason in LOST_REASONS]
    real = [p for p in failed_pods if p.reason not in LOST_REASONS]
    if real:
        first = real[0]
        return summary("Failed", first.reason or "Error", f"pod {first.name}: {first.message}")
    if lost:
        return summary("Evicted", lost[0].reason, f"pod {lost[0].name} lost")
    if len(pods) < expected:
        return summary("")
    if succeeded == expected:
        return summary("Succeeded")
    if running + succeeded == expected:
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
