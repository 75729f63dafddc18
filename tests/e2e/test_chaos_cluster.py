"""A short seeded chaos run (bench/chaos.py) with an agent over a real local cluster beside
the simulated ones: its kube-apiserver stopped and started again and its agent killed with
`kill -9`, among faults drawn from the seed; the pod-level invariants are read from the
cluster's apiserver throughout (no node over capacity, no exclusive job at two epochs, fast
double runs closed by fencing). A failure names the seed (`python -m bench.chaos --seed N
--faults K --stop-apiserver 1 --kill-real-agent 1`)."""

from __future__ import annotations

import pytest

from bench.chaos import Kube, run_chaos
from tests.e2e.conftest import ExtendedClusters

pytestmark = pytest.mark.e2e

SEED, FAULTS = 5, 4
AT_LEAST = {"stop_apiserver": 1, "kill_real_agent": 1}


async def test_a_seeded_chaos_run_with_a_real_cluster_breaks_no_invariant(
    extended_clusters: ExtendedClusters,
) -> None:
    env = extended_clusters.env
    report = await run_chaos(SEED, FAULTS, AT_LEAST, Kube(env, env.cluster("dc-beijing")))
    assert report.violations == [], "\n".join(report.lines())
    assert sum(report.faults.values()) == FAULTS and report.submitted > 0
    assert report.pod_samples > 0
