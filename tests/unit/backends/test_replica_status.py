"""Per replica: exit code, reason and restarts from real pod statuses, and runs again in place
up to the job's backoffLimit (the agent's status module)."""

from __future__ import annotations

from typing import Any

import pytest

from cluster_agents.agent.backend import PodStatus
from cluster_agents.agent.render import render
from cluster_agents.agent.status import next_attempt, replica_statuses, summarize
from cluster_agents.backends.k8s_pods import managed_pod, pod_status
from federation.wire import annotations as ann
from tests.compiled_jobs import assignment
from tests.unit.backends.k8s_objects import CATALOG, JOB, suanpan_pod

T0, T1 = "2026-12-03T08:00:00Z", "2026-12-03T08:05:00Z"
# container and pod statuses as a kubelet (v1.31) writes them
OOM = {
    "phase": "Failed",
    "containerStatuses": [
        {
            "name": "w",
            "image": "busybox",
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {
                "terminated": {
                    "exitCode": 137,
                    "reason": "OOMKilled",
                    "startedAt": T0,
                    "finishedAt": T1,
                    "containerID": "containerd://1",
                }
            },
            "lastState": {},
        }
    ],
}
IMAGE_PULL = {
    "phase": "Pending",
    "containerStatuses": [
        {
            "name": "w",
            "image": "registry.example/nope:1",
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {
                "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": 'Back-off pulling image "registry.example/nope:1"',
                }
            },
            "lastState": {},
        }
    ],
}
EVICTED = {
    "phase": "Failed",
    "reason": "Evicted",
    "message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 42Mi.",
    "containerStatuses": [
        {
            "name": "w",
            "restartCount": 0,
            "state": {
                "terminated": {
                    "exitCode": 137,
                    "reason": "ContainerStatusUnknown",
                    "message": "The container could not be located when the pod was terminated",
                }
            },
        }
    ],
}
DEADLINE = {
    "phase": "Failed",
    "reason": "DeadlineExceeded",
    "message": "Pod was active on the node longer than the specified deadline",
    "containerStatuses": [
        {
            "name": "w",
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 143, "reason": "Error", "startedAt": T0}},
        }
    ],
}
CRASH_LOOP = {
    "phase": "Running",
    "initContainerStatuses": [
        {"name": "setup", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}
    ],
    "containerStatuses": [
        {
            "name": "w",
            "restartCount": 5,
            "state": {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 2m40s restarting failed container=w",
                }
            },
            "lastState": {"terminated": {"exitCode": 2, "reason": "Error", "finishedAt": T1}},
        },
        {"name": "sidecar", "restartCount": 1, "state": {"running": {"startedAt": T0}}},
    ],
}
COMPLETED = {
    "phase": "Succeeded",
    "containerStatuses": [
        {
            "name": "w",
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
        }
    ],
}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (OOM, ("Failed", "OOMKilled", 137, 0)),
        (IMAGE_PULL, ("Pending", "ImagePullBackOff", None, 0)),
        (EVICTED, ("Failed", "Evicted", 137, 0)),
        (DEADLINE, ("Failed", "DeadlineExceeded", 143, 0)),
        (CRASH_LOOP, ("Running", "CrashLoopBackOff", 2, 6)),
        (COMPLETED, ("Succeeded", "", 0, 0)),
    ],
)
def test_phase_reason_exit_code_and_restarts(
    given: dict[str, Any], expected: tuple[str, str, int | None, int]
) -> None:
    parsed = managed_pod(suanpan_pod("sp-x-0", "n1", status=given))
    assert parsed is not None
    s = pod_status(parsed, True)
    assert (s.phase, s.reason, s.exit_code, s.restarts) == expected
    (replica,) = replica_statuses([s])
    assert (replica.phase, replica.reason, replica.exit_code, replica.restarts) == expected


def test_the_attempt_comes_from_its_label() -> None:
    obj = suanpan_pod("sp-x-0-a3", "n1", status=OOM)
    obj["metadata"]["labels"][ann.ATTEMPT_LABEL] = "3"
    parsed = managed_pod(obj)
    assert parsed is not None and parsed.attempt == 3
    assert (managed_pod(suanpan_pod("sp-x-0", "n1")) or parsed).attempt == 1  # before retries


def pod(replica: int, attempt: int, phase: str, reason: str = "", **kw: Any) -> PodStatus:
    suffix = f"-a{attempt}" if attempt > 1 else ""
    name = f"sp-x-e2-w-{replica}{suffix}"
    return PodStatus(name, JOB, 2, "w", replica, phase, reason=reason, attempt=attempt, **kw)  # type: ignore[arg-type]


def test_a_replica_failing_on_its_own_runs_again_until_its_failures_exceed_the_limit() -> None:
    assert next_attempt(None, 2) == 1
    assert next_attempt(pod(0, 1, "Running"), 2) == 1
    assert next_attempt(pod(0, 1, "Failed", "OOMKilled"), 2) == 2
    assert next_attempt(pod(0, 2, "Failed", "Error"), 2) == 3
    assert next_attempt(pod(0, 3, "Failed", "Error"), 2) == 3  # third failure: no more
    assert next_attempt(pod(0, 1, "Failed", "Error"), 0) == 1  # backoffLimit 0: never
    assert next_attempt(pod(0, 1, "Failed", "NodeLost"), 2) == 1  # the placement's fate


def test_only_a_replicas_latest_attempt_counts() -> None:
    retried = [
        pod(0, 1, "Failed", "OOMKilled", exit_code=137),
        pod(0, 2, "Running"),
        pod(1, 1, "Running"),
    ]
    assert summarize(retried, 2, now=0, gang_timeout_s=120).state == "Running"
    exhausted = [pod(0, 1, "Failed", "Error"), pod(0, 2, "Failed", "Error", message="boom")]
    done = summarize([*exhausted, pod(1, 1, "Running")], 2, now=0, gang_timeout_s=120)
    assert (done.state, done.reason, done.failed) == ("Failed", "Error", 1)
    assert done.message == "pod sp-x-e2-w-0-a2 (attempt 2): boom"
    replicas = replica_statuses(retried)
    assert [(r.replica, r.attempt, r.phase) for r in replicas] == [
        (0, 2, "Running"),
        (1, 1, "Running"),
    ]
    last = replicas[0].last
    assert last is not None and (last.attempt, last.exit_code, last.reason) == (1, 137, "OOMKilled")
    assert replicas[1].last is None


def test_a_replica_run_again_keeps_its_hostname_rank_and_environment() -> None:
    worker = {
        "name": "worker",
        "replicas": 2,
        "image": "i",
        "resources": {"accelerators": {"count": 8, "anyOf": [{"flavor": "huawei/*"}]}},
    }
    job = assignment(CATALOG, [worker], {"worker": "huawei/Ascend910B3"}, job=JOB, epoch=2)
    first = {p.replica: p for p in render(job, "suanpan", CATALOG)}
    again = {p.replica: p for p in render(job, "suanpan", CATALOG, {("worker", 1): 2})}
    assert again[0] == first[0]
    assert again[1].name == f"{first[1].name}-a2" and again[1].attempt == 2
    assert again[1].labels[ann.ATTEMPT_LABEL] == "2"
    assert (again[1].hostname, again[1].env, again[1].gang) == (
        first[1].hostname,
        first[1].env,
        first[1].gang,
    )
    assert again[1].gated  # behind the gang gate until the agent lifts it with its peers bound


def test_an_exit_code_kubernetes_could_not_have_written_is_no_exit_code() -> None:
    """The agent must never fail to report because of one odd pod."""
    for odd in ("3", 2**40, True, None):
        bad = {
            "phase": "Failed",
            "containerStatuses": [
                {"name": "w", "state": {"terminated": {"reason": "Error", "exitCode": odd}}}
            ],
        }
        parsed = managed_pod(suanpan_pod("sp-x-0", "n1", status=bad))
        assert parsed is not None and parsed.exit_code is None
        (replica,) = replica_statuses([pod_status(parsed, True)])
        assert replica.exit_code is None and replica.reason == "Error"
