"""Dynamic replay: priorities, preemption and the compressed clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from federation.scheduling import DEFAULT_CONFIG
from federation.simulation.dynamic import (
    ElasticLoad,
    Timing,
    arrival_times,
    overload_arrivals,
    run_dynamic,
)
from federation.simulation.trace import TraceNode, TracePod

NO_PREEMPTION = replace(DEFAULT_CONFIG, preemption=False)
NODE = [TraceNode("n0", 16_000, 65_536, 1, "T4")]


def pod(name: str, qos: str, created: int, life: int = 100) -> TracePod:
    return TracePod(name, 1000, 1024, 1, 1000, (), qos, created, created + life, created)


def test_a_high_priority_pod_preempts_a_best_effort_one() -> None:
    result = run_dynamic(NODE, [pod("be", "BE", 0), pod("ls", "LS", 10)], "fgd", load=0.0)
    assert result.preemptions == 1
    assert result.delays["high"] == [0.0] and result.delays["low"] == [0.0]  # first starts
    assert result.times[-1] > 200  # the BE pod restarted after the LS pod left


def test_without_preemption_the_high_priority_pod_waits() -> None:
    result = run_dynamic(NODE, [pod("be", "BE", 0), pod("ls", "LS", 10)], "fgd", 0.0, NO_PREEMPTION)
    assert result.preemptions == 0 and round(result.delays["high"][0]) == 90


def test_fifo_runs_the_queue_in_arrival_order_whatever_the_class() -> None:
    pods = [pod("first", "LS", 0), pod("be", "BE", 10), pod("ls", "LS", 20)]
    result = run_dynamic(NODE, pods, "fgd", 0.0, NO_PREEMPTION, fifo=True)
    # the BE pod arrived before the second LS pod, so it runs first
    assert [round(d) for d in result.delays["low"]] == [90]
    assert sorted(round(d) for d in result.delays["high"]) == [0, 180]


def test_arrivals_are_compressed_to_the_offered_load() -> None:
    pods = [pod(f"p{k}", "LS", 1000 * k, life=10) for k in range(10)]
    assert arrival_times(pods, 1000, 0.0)[1:] == [1000.0 * k for k in range(1, 10)]
    squeezed = arrival_times(pods, 1000, 0.5)
    assert squeezed[-1] < 9000 and squeezed == sorted(squeezed)


def test_preemption_costs_are_counted_by_class() -> None:
    result = run_dynamic(NODE, [pod("be", "BE", 0), pod("ls", "LS", 10)], "fgd", load=0.0)
    assert result.preempted == {"low": 1, "mid": 0, "high": 0}
    # one GPU ran 9.9 s for nothing
    assert result.lost_gpu_hours == pytest.approx({"low": 9.9 / 3600, "mid": 0.0, "high": 0.0})
    assert result.completions == {"low": [209.9], "mid": [], "high": [100.0]}  # BE restarted
    summary = result.summary()
    assert summary["jct_p95_s_high"] == 100.0 and "frag_time_avg_pct" in summary


def test_overload_repeats_the_trace_at_the_factor_of_the_capacity() -> None:
    pods = [pod(f"p{k}", "LS", 1000 * k, life=100) for k in range(10)]  # 1,000 GPU-seconds
    copies, arrivals = overload_arrivals(pods, 1000, 2.0, horizon_s=1000)  # one GPU: 500 s
    assert copies == pods + pods and arrivals == sorted(arrivals)
    assert arrivals[0] == pytest.approx(90.0) and arrivals[9] == pytest.approx(590.0)
    assert arrivals[10] == pytest.approx(590.0) and arrivals[-1] == pytest.approx(1090.0)


def gpus(name: str, qos: str, created: int, count: int, life: int = 100) -> TracePod:
    return TracePod(name, 1000, 1024, count, 1000, (), qos, created, created + life, created)


EIGHT = [TraceNode("n0", 64_000, 262_144, 8, "V100")]


def test_a_reservation_lets_a_large_pod_start_when_the_running_ones_end() -> None:
    # Two 4-GPU pods run until 100 and 150; an 8-GPU pod arrives at 10; 2-GPU pods that
    # last 100 s keep arriving and, without a reservation, take what frees up first.
    pods = [gpus("a", "LS", 0, 4, 100), gpus("b", "LS", 0, 4, 150), gpus("big", "LS", 10, 8)]
    pods += [gpus(f"s{k}", "LS", 20 + k, 2, 100) for k in range(6)]
    exact = Timing(runtime_factor=1.0)
    reserved = run_dynamic(EIGHT, pods, "fgd", load=0.0, timing=exact)
    starved = run_dynamic(EIGHT, pods, "fgd", load=0.0, timing=replace(exact, backfill=False))
    assert reserved.large_delays == [140.0]  # starts when "b" ends, at 150
    assert starved.large_delays[0] > 140.0
    assert reserved.summary()["delay_p50_s_large"] == 140.0


def test_checkpoints_cut_the_work_lost_and_the_restart() -> None:
    pods = [pod("be", "BE", 0, life=100), pod("ls", "LS", 25)]
    result = run_dynamic(NODE, pods, "fgd", load=0.0, timing=Timing(checkpoint_s=10))
    # "be" arrives at 0.25 (the 1st percentile), runs 24.75 s, checkpointed at 20 s
    assert result.lost_gpu_hours == {"low": pytest.approx(4.75 / 3600), "mid": 0.0, "high": 0.0}
    assert result.completions["low"] == [pytest.approx(204.75)]  # restarts at 125, 80 s left


def test_elastic_jobs_fill_idle_gpus_and_give_them_back_to_the_trace() -> None:
    # 8 GPUs; a 4-GPU pod runs 0..100 and another arrives at 200 for 100 s. One elastic job
    # (1 to 8 one-GPU replicas, below every trace pod) starts beside the first, grows into
    # the idle GPUs, gives back 4 when the second arrives (no eviction: it stays above its
    # minimum), and grows again when that one leaves.
    pods = [gpus("a", "LS", 0, 4, 100), gpus("b", "BE", 200, 4, 100)]
    load = ElasticLoad(jobs=1, min_replicas=1, max_replicas=8)
    result = run_dynamic(EIGHT, pods, "fgd", load=0.0, elastic=load)
    assert result.delays == {"low": [0.0], "mid": [], "high": [0.0]}  # nobody waited
    assert result.elastic_shrinks == 1 and result.elastic_evictions == 0 and result.preemptions == 0
    # `a` arrives at 2 (the replay starts at the first percentile of arrivals): the job held
    # 4 GPUs while `a` ran (2..102), 8 until `b` came (..200), 4 while it ran (..300)
    assert result.times == [2.0, 102.0, 200.0, 300.0]
    assert result.elastic_gpu_hours == pytest.approx((4 * 100 + 8 * 98 + 4 * 100) / 3600)
    assert result.elastic_gained_gpu_hours == pytest.approx((3 * 100 + 7 * 98 + 3 * 100) / 3600)
    alone = run_dynamic(EIGHT, pods, "fgd", load=0.0)
    assert alone.idle_gpu_hours() == pytest.approx((4 * 100 + 8 * 98 + 4 * 100) / 3600)
    assert result.idle_gpu_hours() == pytest.approx(0.0)
