"""Overload replay that ranks policies: the openb trace at 1.5x, 2x and 3x the fleet's capacity.

The dynamic replay (`federation.simulation.dynamic`, the real core at level 1 and the node
policy at level 2) repeats the default trace over a 3-hour horizon so that its arrivals ask
`factor` times the fleet's GPU-seconds, on K = 4 member clusters. Each setup is one row:

- `suanpan`: the hub's default configuration (priority order, preemption of best-effort pods)
  with Suanpan's node policy;
- `fifo`: arrival order, one priority for all, no preemption (classes are still reported);
- `fgd`, `bestfit`, `packing`: the default configuration with that node policy.

- `suanpan+backfill`: every pod declares 1.5 times its trace lifetime as its run limit
  (users overestimate), so pods of 8 GPUs or more get reservations and smaller ones backfill
  around them (`Timing.runtime_factor`);
- `suanpan+checkpoints`: every pod checkpoints every 30 minutes, so victims lose only the work
  since their last checkpoint and the core prefers victims that lose least.

A further setup is one more `Setup`: `core` sets fields of `SchedulerConfig`, `timing` what the
replay tells the core about time.

A full-size replay takes hours on 2 cores (a cycle re-runs the core's victim search for every
waiting pod), so the fleet and the trace are sampled: every `SAMPLE`-th node and pod by name.
The sample keeps the trace's mix of shapes, classes and lifetimes, not its size.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from bench.plots import Curve, class_bars, over_time
from bench.results import Figure
from federation.nodeplacement import DEFAULT_POLICY
from federation.scheduling import DEFAULT_CONFIG, SchedulerConfig
from federation.simulation.cli import NODES_FILE, PODS_FILE, openb_dir
from federation.simulation.dynamic import CLASSES, DynamicResult, Timing, run_dynamic
from federation.simulation.trace import TraceNode, TracePod, load_nodes, load_pods

FACTORS = (1.5, 2.0, 3.0)
CLUSTERS = 4
SAMPLE = 128
SECTIONS = Path(__file__).resolve().parent / "sections"


@dataclass(frozen=True)
class Setup:
    """One configuration of the replay: node policy, core configuration, queue discipline."""

    name: str
    policy: str = DEFAULT_POLICY
    preemption: bool = True
    fifo: bool = False
    core: tuple[tuple[str, object], ...] = ()  # further `SchedulerConfig` fields
    timing: Timing = field(default_factory=Timing)  # run limits, checkpoints, reservations

    def config(self) -> SchedulerConfig:
        """The core's configuration for this setup."""
        return replace(DEFAULT_CONFIG, preemption=self.preemption, **dict(self.core))  # type: ignore[arg-type]


SETUPS = (
    Setup("suanpan"),
    Setup("fifo", preemption=False, fifo=True),
    Setup("fgd", policy="fgd"),
    Setup("bestfit", policy="bestfit"),
    Setup("packing", policy="packing"),
    Setup("suanpan+backfill", timing=Timing(runtime_factor=1.5)),
    Setup("suanpan+checkpoints", timing=Timing(checkpoint_s=1800)),
)


def sample(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], every: int
) -> tuple[list[TraceNode], list[TracePod]]:
    """Every `every`-th GPU node and timed pod, by name."""
    gpu = sorted((n for n in nodes if n.gpu > 0), key=lambda n: n.name)
    timed = sorted((p for p in pods if p.creation_time is not None), key=lambda p: p.name)
    return gpu[::every], timed[::every]


def _replay(job: tuple[Setup, float, int]) -> tuple[Setup, float, DynamicResult, float]:
    setup, factor, every = job
    nodes, pods = sample(
        load_nodes(openb_dir() / NODES_FILE), load_pods(openb_dir() / PODS_FILE), every
    )
    start = time.perf_counter()
    result = run_dynamic(
        nodes,
        pods,
        setup.policy,
        config=setup.config(),
        clusters=CLUSTERS,
        overload=factor,
        timing=setup.timing,
        fifo=setup.fifo,
    )
    return setup, factor, result, time.perf_counter() - start


def _key(factor: float) -> str:
    return f"x{factor:g}".replace(".", "_")


def _figures(runs: Sequence[tuple[Setup, float, DynamicResult, float]]) -> list[Figure]:
    figures = []
    for setup, factor, result, seconds in runs:
        params = {"setup": setup.name, "factor": factor, "clusters": CLUSTERS, "sample": SAMPLE}
        for name, value in result.summary().items():
            figures.append(
                Figure(
                    f"overload_{_key(factor)}_{setup.name}_{name}", float(value), "", False, params
                )
            )
        figures.append(
            Figure(
                f"overload_{_key(factor)}_{setup.name}_runtime_s",
                round(seconds, 1),
                "s",
                False,
                params,
            )
        )
    return figures


def _section(
    runs: Sequence[tuple[Setup, float, DynamicResult, float]],
    nodes: int,
    pods: int,
    runtime_s: float,
) -> str:
    lines = [
        "## Overload replay: policies ranked under pressure",
        "",
        f"The default trace sampled to every {SAMPLE}th node and pod ({nodes} nodes, {pods} "
        f"pods per copy), repeated over 3 h so that arrivals ask 1.5x, 2x and 3x the fleet's "
        f"GPU-seconds, K = {CLUSTERS} member clusters, the real core at level 1. Per class (LS "
        "high, Burstable/Guaranteed mid, BE low and preemptible): queueing delay and job "
        "completion time p50/p95/p99 (s), pods preempted, GPU-hours preempted runs had done; "
        "utilization and fragmentation are time averages over the arrival window. One run each.",
        "",
    ]
    for factor in FACTORS:
        lines += [
            f"### {factor:g}x the capacity",
            "",
            "| setup | class | delay p50 / p95 / p99 | JCT p50 / p95 / p99 | preempted "
            "| GPU-h lost | util. % | frag. % |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for setup, f, result, _ in runs:
            if f != factor:
                continue
            s = result.summary()
            for cls in reversed(CLASSES):
                delay = " / ".join(f"{s[f'delay_p{q}_s_{cls}']:,.0f}" for q in (50, 95, 99))
                jct = " / ".join(f"{s[f'jct_p{q}_s_{cls}']:,.0f}" for q in (50, 95, 99))
                first = cls == CLASSES[-1]
                util = s.get("gpu_utilization_time_avg_pct", 0.0)
                frag = s.get("frag_time_avg_pct", 0.0)
                lines.append(
                    f"| {setup.name if first else ''} | {cls} | {delay} | {jct} | "
                    f"{s[f'preempted_{cls}']} | {s[f'lost_gpu_hours_{cls}']:.2f} | "
                    + (f"{util:.1f} | {frag:.2f} |" if first else " | |")
                )
        lines.append("")
    lines += [
        "### Large pods (8 GPUs or more), backfill and checkpoints",
        "",
        "| factor | setup | large-pod delay p50 / p95 / p99 (s) | GPU-h lost | preemptions |",
        "|---:|---|---:|---:|---:|",
    ]
    for setup, factor, result, _ in runs:
        s = result.summary()
        large = " / ".join(f"{s[f'delay_p{q}_s_large']:,.0f}" for q in (50, 95, 99))
        lines.append(
            f"| {factor:g}x | {setup.name} | {large} | {s['lost_gpu_hours']:.1f} "
            f"| {s['preemptions']} |"
        )
    lines += [
        "",
        f"Run time: {runtime_s / 60:.1f} min for the {len(runs)} replays on 2 worker processes.",
        "",
        "![delay p95 per class](overload_delay_p95.png)",
        "![utilization over time](overload_utilization.png)",
        "![fragmentation over time](overload_fragmentation.png)",
        "",
    ]
    return "\n".join(lines)


def _window(result: DynamicResult, values: Sequence[float]) -> tuple[Curve, Curve]:
    """Times and values (as %) up to the last arrival: a few months-long pods run far past it."""
    t = np.array(result.times)
    inside = t <= result.window_end
    return t[inside], 100.0 * np.array(values)[inside]


def _plots(runs: Sequence[tuple[Setup, float, DynamicResult, float]]) -> None:
    SECTIONS.mkdir(parents=True, exist_ok=True)
    panels = {
        f"{factor:g}x": {s.name: r for s, f, r, _ in runs if f == factor} for factor in FACTORS
    }
    delays = {
        title: {
            name: [r.summary()[f"delay_p95_s_{c}"] for c in CLASSES] for name, r in results.items()
        }
        for title, results in panels.items()
    }
    class_bars(delays, CLASSES, "queueing delay p95 (s)", SECTIONS / "overload_delay_p95.png")
    for attr, label, path in (
        ("utilization", "GPUs allocated (%)", "overload_utilization.png"),
        ("fragmentation", "fragmented GPUs (% of all)", "overload_fragmentation.png"),
    ):
        series = {
            title: {name: _window(r, getattr(r, attr)) for name, r in results.items()}
            for title, results in panels.items()
        }
        over_time(series, label, SECTIONS / path)


def run(setups: Sequence[Setup] = SETUPS, every: int = SAMPLE, workers: int = 2) -> list[Figure]:
    """Replay every setup at every factor; write the section and plots; return the figures."""
    start = time.perf_counter()
    jobs = [(s, f, every) for f in FACTORS for s in setups]
    with ProcessPoolExecutor(workers) as ex:
        runs = list(ex.map(_replay, jobs))
    runtime_s = time.perf_counter() - start
    nodes, pods = sample(
        load_nodes(openb_dir() / NODES_FILE), load_pods(openb_dir() / PODS_FILE), every
    )
    _plots(runs)
    (SECTIONS / "overload_study.md").write_text(_section(runs, len(nodes), len(pods), runtime_s))
    figures = _figures(runs)
    figures.append(
        Figure("overload_study_runtime_s", round(runtime_s, 1), "s", False, {"workers": workers})
    )
    return figures
