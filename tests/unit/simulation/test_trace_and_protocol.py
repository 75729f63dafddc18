"""Loading the trace and the paper's workload protocol."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from federation.simulation.protocol import tune_workload
from federation.simulation.trace import TracePod, load_nodes, load_pods


def test_loader_reads_models_specs_and_times(trace_dir: Path) -> None:
    nodes = load_nodes(trace_dir / "openb_node_list_gpu_node.csv")
    assert [(n.gpu, n.model) for n in nodes] == [(2, "T4"), (4, "V100M16"), (8, "G2"), (0, "")]
    pods = load_pods(trace_dir / "openb_pod_list_default.csv")
    assert pods[4].gpu_spec == ("T4", "V100M16") and pods[4].scheduled_time is None
    assert pods[1].is_share and pods[2].total_gpu_milli == 2000 and pods[3].gpu_milli == 0
    assert pods[5].qos == "Guaranteed" and pods[5].deletion_time == 300


def test_loader_accepts_the_five_column_multigpu_files(trace_dir: Path) -> None:
    pods = load_pods(trace_dir / "openb_pod_list_multigpu20.csv")
    assert len(pods) == 7 and pods[0].qos == "" and pods[0].creation_time is None


def pod(name: str, num: int, milli: int = 1000) -> TracePod:
    return TracePod(name, 1000, 1024, num, milli if num else 0)


TRACE = [pod(f"p{k}", 1, 500) for k in range(10)] + [pod("c", 0), pod("w", 2)]


def test_tuning_up_keeps_every_trace_pod_and_appends_draws_up_to_the_target() -> None:
    work = tune_workload(TRACE, capacity_milli=10_000, rng=np.random.default_rng(42))
    total = sum(p.total_gpu_milli for p in work)
    assert {p.name for p in TRACE} <= {p.name for p in work[: len(TRACE)]}
    last = work[-1]
    # upstream's check adds the draw's per-GPU milli, so a multi-GPU draw may pass the target
    assert total - last.total_gpu_milli + last.gpu_milli <= 13_000 < total + 1000
    assert work == tune_workload(TRACE, capacity_milli=10_000, rng=np.random.default_rng(42))
    assert work != tune_workload(TRACE, capacity_milli=10_000, rng=np.random.default_rng(43))


def test_tuning_down_removes_random_pods_until_at_or_below_the_target() -> None:
    work = tune_workload(TRACE, capacity_milli=3000, rng=np.random.default_rng(1))
    assert sum(p.total_gpu_milli for p in work) <= 3900 < 7000
    assert len(work) < len(TRACE)
