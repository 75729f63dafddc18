"""Reproduction of the FGD paper's medians on the default openb trace (slow: ~1 min a policy).

Run with `pytest -m slow tests/unit/simulation/test_reproduction.py`.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from federation.simulation.cli import NODES_FILE, PODS_FILE, openb_dir
from federation.simulation.expected import AUTHOR_POLICIES, load_medians
from federation.simulation.protocol import PAPER_SEEDS
from federation.simulation.study import run_seed
from federation.simulation.trace import load_nodes, load_pods

pytestmark = pytest.mark.slow


def _unallocated(args: tuple[str, int]) -> float:
    policy, seed = args
    data = openb_dir()
    run = run_seed(load_nodes(data / NODES_FILE), load_pods(data / PODS_FILE), policy, seed)
    return float(run.curves.unallocated_pct[100])


@pytest.mark.parametrize("policy", sorted(AUTHOR_POLICIES.values()))
def test_median_unallocated_gpus_match_the_authors(policy: str) -> None:
    if not (openb_dir() / PODS_FILE).is_file():
        pytest.skip("openb trace not available")
    authors = 100.0 - load_medians(openb_dir() / "expected_results")[("default", policy)][100]
    with ProcessPoolExecutor(2) as ex:
        ours = float(np.median(list(ex.map(_unallocated, [(policy, s) for s in PAPER_SEEDS]))))
    assert abs(ours - authors) <= 0.3, f"{policy}: ours {ours:.2f}, authors {authors:.2f}"
