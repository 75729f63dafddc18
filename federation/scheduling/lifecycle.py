"""Lifecycles of jobs, placements and clusters as explicit transition tables.

The store checks every state change against these tables; an illegal one is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from federation.errors import IllegalTransition

JOB_TRANSITIONS: Mapping[str, frozenset[str]] = {
    "Queued": frozenset({"Placed", "Cancelled", "Failed"}),
    # a released placement (gang timeout, cluster lost, drain) sends the job back to the queue
    "Placed": frozenset({"Dispatched", "Queued", "Preempting", "Cancelled", "Failed"}),
    "Dispatched": frozenset({"Running", "Queued", "Preempting", "Cancelled", "Failed"}),
    "Running": frozenset({"Succeeded", "Failed", "Preempting", "Cancelled", "Queued"}),
    "Preempting": frozenset({"Queued", "Cancelled", "Failed"}),
    "Succeeded": frozenset(),
    "Failed": frozenset(),
    "Cancelled": frozenset(),
}
TERMINAL_JOB_STATES = frozenset(s for s, nxt in JOB_TRANSITIONS.items() if not nxt)

PLACEMENT_TRANSITIONS: Mapping[str, frozenset[str]] = {
    "Active": frozenset({"Released"}),
    "Released": frozenset(),
}

CLUSTER_TRANSITIONS: Mapping[str, frozenset[str]] = {
    "Pending": frozenset({"Ready"}),
    "Ready": frozenset({"NotReady"}),
    "NotReady": frozenset({"Ready", "Offline"}),
    "Offline": frozenset({"Ready"}),
}

_TABLES = {
    "job": JOB_TRANSITIONS,
    "placement": PLACEMENT_TRANSITIONS,
    "cluster": CLUSTER_TRANSITIONS,
}


def transition(kind: str, current: str, target: str) -> str:
    """Return `target` if a `kind` ("job", "placement", "cluster") may go there from `current`;
    raise IllegalTransition otherwise."""
    if target not in _TABLES[kind].get(current, frozenset()):
        raise IllegalTransition(kind, current, target)
    return target


def check_job(current: str, target: str) -> None:
    """Raise IllegalTransition unless a job may go from `current` to `target`."""
    transition("job", current, target)
