"""A short seeded chaos run (bench/chaos.py) over simulated clusters: real hub replicas,
PostgreSQL and agent processes under the leader frozen and cut from its database and other
faults drawn from the seed; every invariant must hold and scheduling must resume after each
leader fault. A failure names the seed that reproduces it (`python -m bench.chaos --no-kube
--seed N --faults K --freeze-leader 1 --cut-leader-db 1`). The run with a real cluster is
tests/e2e/test_chaos_cluster.py."""

from __future__ import annotations

import pytest

from bench.chaos import run_chaos

pytestmark = pytest.mark.integration

SEED, FAULTS = 7, 5
AT_LEAST = {"freeze_leader": 1, "cut_leader_db": 1}


async def test_a_short_seeded_chaos_run_breaks_no_invariant() -> None:
    report = await run_chaos(SEED, FAULTS, AT_LEAST)
    assert report.violations == [], "\n".join(report.lines())
    assert sum(report.faults.values()) == FAULTS and report.submitted > 0
    assert len(report.recovery["takeover"]) >= 2  # the frozen and the cut leader replaced
