"""Lifecycle tables: the paths a job, placement and cluster may take, and nothing else."""

from __future__ import annotations

import pytest

from federation.errors import IllegalTransition
from federation.store.lifecycle import JOB_TRANSITIONS, TERMINAL_JOB_STATES, transition

ALLOWED = [
    ("job", "Queued", "Placed"),
    ("job", "Placed", "Dispatched"),
    ("job", "Dispatched", "Running"),
    ("job", "Running", "Succeeded"),
    ("job", "Running", "Failed"),
    ("job", "Running", "Cancelled"),
    ("job", "Placed", "Queued"),  # placement released (gang timeout, cluster lost)
    ("job", "Dispatched", "Queued"),
    ("job", "Running", "Preempting"),
    ("job", "Placed", "Preempting"),
    ("job", "Dispatched", "Preempting"),
    ("job", "Preempting", "Queued"),
    ("job", "Queued", "Cancelled"),
    ("placement", "Active", "Released"),
    ("cluster", "Ready", "NotReady"),
    ("cluster", "NotReady", "Ready"),
]

REFUSED = [
    ("job", "Queued", "Running"),  # must be placed and dispatched first
    ("job", "Succeeded", "Queued"),  # terminal
    ("job", "Cancelled", "Running"),
    ("job", "Preempting", "Running"),
    ("placement", "Released", "Active"),
    ("cluster", "Pending", "NotReady"),
]


@pytest.mark.parametrize(("kind", "current", "target"), ALLOWED)
def test_allowed_transitions(kind: str, current: str, target: str) -> None:
    assert transition(kind, current, target) == target


@pytest.mark.parametrize(("kind", "current", "target"), REFUSED)
def test_refused_transitions(kind: str, current: str, target: str) -> None:
    with pytest.raises(IllegalTransition):
        transition(kind, current, target)


def test_terminal_states_lead_nowhere_and_every_target_is_a_state() -> None:
    assert {"Succeeded", "Failed", "Cancelled"} == TERMINAL_JOB_STATES
    for targets in JOB_TRANSITIONS.values():
        assert targets <= JOB_TRANSITIONS.keys()
