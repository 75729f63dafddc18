"""The chaos suite's fault schedule (bench/chaos.py): the long run's counts are met."""

from __future__ import annotations

import random
from collections import Counter

from bench.chaos import FAULTS, schedule


def test_the_counts_asked_for_are_met_and_the_rest_drawn() -> None:
    kinds = schedule(random.Random(5), 30, {"kill_leader": 10, "partition": 5})
    counted = Counter(kinds)
    assert len(kinds) == 30 and set(kinds) <= set(FAULTS)
    assert counted["kill_leader"] >= 10 and counted["partition"] >= 5
    assert schedule(random.Random(5), 30, {"kill_leader": 10, "partition": 5}) == kinds


def test_counts_above_the_total_are_all_kept() -> None:
    assert Counter(schedule(random.Random(1), 3, {"db_restart": 4})) == {"db_restart": 4}
