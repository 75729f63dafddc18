"""End to end on a tiny trace: deterministic per seed, every policy, one or more clusters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from federation.nodeplacement import POLICY_NAMES
from federation.simulation.study import run_seed
from federation.simulation.trace import load_nodes, load_pods


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_a_seed_is_deterministic(trace_dir: Path, policy: str) -> None:
    nodes = load_nodes(trace_dir / "openb_node_list_gpu_node.csv")
    pods = load_pods(trace_dir / "openb_pod_list_default.csv")
    first = run_seed(nodes, pods, policy, seed=42)
    again = run_seed(nodes, pods, policy, seed=42)
    assert np.array_equal(first.curves.alloc_pct, again.curves.alloc_pct, equal_nan=True)
    assert first.pods >= len(pods) and 0 <= first.failed_pods < first.pods
    assert first.curves.alloc_pct[0] >= 0
