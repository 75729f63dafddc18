"""The chaos suite's pod-level checks (bench/chaos_pods.py) on pods as an apiserver lists them."""

from __future__ import annotations

from typing import Any

from bench.chaos_pods import HubJob, double_runs, over_capacity
from federation.wire import annotations as ann


def pod(job: str, epoch: int, node: str = "n1", phase: str = "Running", gpus: int = 4) -> Any:
    return {
        "metadata": {"labels": {ann.JOB_LABEL: job, ann.EPOCH_LABEL: str(epoch)}},
        "spec": {
            "nodeName": node,
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "2"}}}],
        },
        "status": {"phase": phase},
    }


NODES = [{"metadata": {"name": "n1"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}]


def test_devices_over_a_nodes_capacity_are_found_finished_pods_do_not_count() -> None:
    assert over_capacity(NODES, [pod("a", 1), pod("b", 1), pod("c", 1, phase="Succeeded")]) == []
    assert over_capacity(NODES, [pod("a", 1), pod("b", 1), pod("c", 1, phase="Pending")]) == [
        "node n1: 12 nvidia.com/gpu taken of 8"
    ]


def test_a_job_runs_twice_at_two_epochs_here_or_at_an_old_one_while_newer_runs_elsewhere() -> None:
    hub = {
        "a": HubJob(2, "Running", "sz", "fast"),  # moved on: its epoch 1 here runs twice
        "b": HubJob(2, "Dispatched", "sz", "exclusive"),  # not running there yet
        "c": HubJob(1, "Running", "bj", "fast"),  # here, current
    }
    pods = [pod("a", 1), pod("b", 1), pod("c", 1), pod("d", 1), pod("d", 2, node="n2")]
    assert double_runs(pods, hub, "bj") == {
        "a": "epoch 1 running here, epoch 2 on sz",
        "d": "epochs [1, 2] running here",
    }
