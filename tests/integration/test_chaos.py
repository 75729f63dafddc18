"""A short seeded chaos run (bench/chaos.py): real hub replicas, PostgreSQL and agent
processes under leader and follower kills, agent kills, partitions, delays and a database
restart; every invariant must hold. A failure names the seed that reproduces it
(`python -m bench.chaos --seed N --faults K`)."""

from __future__ import annotations

import pytest

from bench.chaos import run_chaos

pytestmark = pytest.mark.integration

SEED, FAULTS = 7, 5


async def test_a_short_seeded_chaos_run_breaks_no_invariant() -> None:
    report = await run_chaos(SEED, FAULTS)
    assert report.violations == [], "\n".join(report.lines())
    assert sum(report.faults.values()) == FAULTS and report.submitted > 0
