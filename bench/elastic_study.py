"""Elastic jobs on the replay: the GPU-hours they gain from capacity nothing else uses.

The dynamic replay (`federation.simulation.dynamic`, the real core at level 1, the node policy
at level 2) of the default trace, sampled like the overload study, once alone and once with
`ElasticLoad`: elastic training jobs of 1-GPU replicas (1 to 16 each) below every trace pod's
priority, from the first arrival to the last departure. The core grows them into capacity no
waiting pod could use and shrinks them (or, at their minimum, evicts them) for trace pods.
Reported: GPU-hours the elastic jobs held above their minimum (gained), against the idle
GPU-hours of the run without them; utilization; the trace pods' queueing delay with and without
them (growth must not make anyone wait); shrinks against evictions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from bench.overload_study import CLUSTERS, SECTIONS, sample
from bench.results import Figure
from federation.nodeplacement import DEFAULT_POLICY
from federation.simulation.cli import NODES_FILE, PODS_FILE, openb_dir
from federation.simulation.dynamic import CLASSES, DynamicResult, ElasticLoad, run_dynamic
from federation.simulation.trace import load_nodes, load_pods

EVERY = 64  # every 64th node and pod of the default trace
LOADS: tuple[float | None, ...] = (None, 1.5)  # the trace's own (compressed) load; 1.5x capacity
ELASTIC = ElasticLoad(jobs=8, min_replicas=1, max_replicas=16)

Run = tuple[float | None, bool, DynamicResult]


def _replay(job: tuple[float | None, bool]) -> Run:
    overload, elastic = job
    nodes, pods = sample(
        load_nodes(openb_dir() / NODES_FILE), load_pods(openb_dir() / PODS_FILE), EVERY
    )
    result = run_dynamic(
        nodes,
        pods,
        DEFAULT_POLICY,
        clusters=CLUSTERS,
        overload=overload,
        elastic=ELASTIC if elastic else None,
    )
    return overload, elastic, result


def _load(overload: float | None) -> str:
    return "trace load" if overload is None else f"{overload:g}x capacity"


def _key(overload: float | None) -> str:
    return "trace" if overload is None else f"x{overload:g}".replace(".", "_")


def _section(runs: Sequence[Run], runtime_s: float) -> str:
    lines = [
        "## Elastic jobs: GPU-hours gained from idle capacity",
        "",
        f"The default trace, every {EVERY}th node and pod, K = {CLUSTERS} clusters, replayed "
        f"alone and beside {ELASTIC.jobs} elastic jobs of 1-GPU replicas "
        f"({ELASTIC.min_replicas} to {ELASTIC.max_replicas} each) below every trace pod's "
        "priority. Gained: GPU-hours they held above their minimum; idle: GPU-hours nothing held "
        "in the run without them (both over the whole replay).",
        "",
        "| load | elastic | GPU-h gained | idle GPU-h (alone) | util. % | shrinks | evictions "
        "| trace delay p95 high / mid / low (s) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    alone = {o: r for o, e, r in runs if not e}
    for overload, elastic, result in runs:
        s = result.summary()
        delays = " / ".join(f"{s[f'delay_p95_s_{c}']:,.0f}" for c in reversed(CLASSES))
        gained = f"{result.elastic_gained_gpu_hours:,.0f}" if elastic else "–"
        lines.append(
            f"| {_load(overload)} | {'yes' if elastic else 'no'} | {gained} "
            f"| {alone[overload].idle_gpu_hours():,.0f} "
            f"| {s.get('gpu_utilization_time_avg_pct', 0.0):.1f} "
            f"| {result.elastic_shrinks if elastic else '–'} "
            f"| {result.elastic_evictions if elastic else '–'} | {delays} |"
        )
    lines += ["", f"Run time: {runtime_s:.0f} s for the {len(runs)} replays.", ""]
    return "\n".join(lines)


def _figures(runs: Sequence[Run]) -> list[Figure]:
    alone = {o: r for o, e, r in runs if not e}
    figures = []
    for overload, elastic, result in runs:
        if not elastic:
            continue
        params = {"load": _load(overload), "every": EVERY, "jobs": ELASTIC.jobs}
        idle = alone[overload].idle_gpu_hours()
        gained = result.elastic_gained_gpu_hours
        figures += [
            Figure(f"elastic_{_key(overload)}_gained_gpu_hours", gained, "GPU-h", True, params),
            Figure(
                f"elastic_{_key(overload)}_idle_used_pct",
                round(100 * gained / idle, 1) if idle else 0.0,
                "%",
                True,
                params,
            ),
            Figure(f"elastic_{_key(overload)}_shrinks", result.elastic_shrinks, "", False, params),
            Figure(
                f"elastic_{_key(overload)}_evictions", result.elastic_evictions, "", False, params
            ),
        ]
    return figures


def run(workers: int = 2) -> list[Figure]:
    """Replay each load alone and with elastic jobs; write the section; return the figures."""
    start = time.perf_counter()
    with ProcessPoolExecutor(workers) as ex:
        runs = list(ex.map(_replay, [(o, e) for o in LOADS for e in (False, True)]))
    SECTIONS.mkdir(parents=True, exist_ok=True)
    (SECTIONS / "elastic_study.md").write_text(_section(runs, time.perf_counter() - start))
    return _figures(runs)
