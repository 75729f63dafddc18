"""Suanpan pods to PodStatus: phase, node and the real reason."""

from __future__ import annotations

from typing import Any

import pytest

from cluster_agents.backends.k8s_pods import managed_pod, pod_status
from federation.wire import annotations as ann
from tests.unit.backends.k8s_objects import JOB, pod, recorded, suanpan_pod


def status(obj: dict[str, Any], node_ready: bool | None = True) -> tuple[str, str, str]:
    parsed = managed_pod(obj)
    assert parsed is not None
    s = pod_status(parsed, node_ready)
    return s.phase, s.reason, s.message


def container(
    name: str, state: dict[str, Any], last: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"name": name, "state": state, "lastState": last or {}}


def test_recorded_kwok_pods() -> None:
    assert status(recorded("pods", "running")) == ("Running", "", "")
    assert status(recorded("pods", "succeeded")) == ("Succeeded", "", "")
    assert status(recorded("pods", "oom_killed")) == (
        "Failed",
        "OOMKilled",
        "pod failed: OOMKilled (container worker: exit code 137)",
    )
    phase, reason, message = status(recorded("pods", "unschedulable"))
    assert (phase, reason) == ("Pending", "Unschedulable")
    assert message.startswith("0/6 nodes are available: 6 Insufficient cpu.")


def test_identity_from_labels_and_metadata() -> None:
    parsed = managed_pod(recorded("pods", "oom_killed"))
    assert parsed is not None
    s = pod_status(parsed, True)
    assert (s.name, s.job, s.epoch, s.task, s.replica) == (
        "sp-0f5c2a8e-e3-worker-1",
        JOB,
        3,
        "worker",
        1,
    )
    assert (s.node, s.deleting, s.created_at) == ("bj-cpu-0", False, 1796000545.0)


WAITING = {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}}


@pytest.mark.parametrize(
    ("phase", "statuses", "expected"),
    [
        (
            "Pending",
            {"containerStatuses": [container("w", {"waiting": {"reason": "ErrImagePull"}})]},
            ("Pending", "ErrImagePull", "container w: ErrImagePull"),
        ),
        (
            "Pending",
            {"containerStatuses": [container("w", WAITING)]},
            ("Pending", "ImagePullBackOff", 'container w: Back-off pulling image "x"'),
        ),
        (
            "Running",
            {
                "containerStatuses": [
                    container("ok", {"running": {}}),
                    container(
                        "w",
                        {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
                        {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
                    ),
                ]
            },
            (
                "Running",
                "CrashLoopBackOff",
                "container w: back-off 5m0s (last termination: OOMKilled, exit code 137)",
            ),
        ),
        (  # a real kubelet reports OOMKilled on the container only
            "Failed",
            {"containerStatuses": [container("w", {"terminated": {"reason": "OOMKilled"}})]},
            ("Failed", "OOMKilled", "container w: OOMKilled"),
        ),
        (
            "Failed",
            {
                "containerStatuses": [
                    container("w", {"terminated": {"reason": "Error", "exitCode": 3}})
                ]
            },
            ("Failed", "Error", "container w: Error (exit code 3)"),
        ),
        (
            "Failed",
            {
                "initContainerStatuses": [
                    container("setup", {"terminated": {"reason": "Error", "message": "exit 3"}})
                ],
                "containerStatuses": [container("w", {"waiting": {"reason": "PodInitializing"}})],
            },
            ("Failed", "Error", "container setup: exit 3"),
        ),
        (
            "Pending",
            {"containerStatuses": [container("w", {"waiting": {"reason": "ContainerCreating"}})]},
            ("Pending", "", ""),
        ),
        (
            "Succeeded",
            {"containerStatuses": [container("w", {"terminated": {"reason": "Completed"}})]},
            ("Succeeded", "", ""),
        ),
        (
            "Failed",
            {"reason": "Evicted", "message": "low on ephemeral-storage"},
            ("Failed", "Evicted", "low on ephemeral-storage"),
        ),
        (
            "Pending",
            {
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
                ]
            },
            ("Pending", "SchedulingGated", ""),
        ),
        ("Surprising", {}, ("Unknown", "", "")),
    ],
)
def test_reasons(phase: str, statuses: dict[str, Any], expected: tuple[str, str, str]) -> None:
    obj = suanpan_pod("sp-x-0", "n1", status={"phase": phase, **statuses})
    assert status(obj) == expected


def test_node_lost() -> None:
    running = suanpan_pod("sp-x-0", "n1", status={"phase": "Running"})
    assert status(running, node_ready=False) == ("Running", "NodeLost", "node n1 is not Ready")
    assert status(running, node_ready=None) == ("Failed", "NodeLost", "node n1 is gone")
    done = suanpan_pod("sp-x-0", "n1", status={"phase": "Succeeded"})
    assert status(done, node_ready=None) == ("Succeeded", "", "")
    unbound = suanpan_pod("sp-x-0", "", status={"phase": "Pending"})
    assert status(unbound, node_ready=None) == ("Pending", "", "")


def test_deleting_and_malformed_labels() -> None:
    obj = suanpan_pod("sp-x-0", "n1")
    obj["metadata"]["deletionTimestamp"] = "2026-11-30T01:02:55Z"
    obj["metadata"]["labels"][ann.EPOCH_LABEL] = "three"
    parsed = managed_pod(obj)
    assert parsed is not None
    assert (parsed.deleting, parsed.epoch) == (True, 0)  # epoch 0: the agent fences it


def test_pods_not_created_by_suanpan_are_ignored() -> None:
    assert managed_pod(pod("web", "n1")) is None
    obj = suanpan_pod("sp-x-0", "n1")
    obj["metadata"]["labels"][ann.MANAGED_LABEL] = "false"
    assert managed_pod(obj) is None
