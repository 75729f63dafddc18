"""`sim openb ...`: replay the openb trace under a placement policy and print the paper's metrics.

    sim openb [--nodes FILE] [--pods FILE] [--policy NAME] [--seeds 42-51] [--clusters K]
              [--workers N] [--json] [--dynamic [--overload X] [--no-preemption]
              [--no-backfill] [--runtime-factor F] [--checkpoint-seconds S] [--large-gpus N]]

Default files come from `$SUANPAN_OPENB_DIR`, else `../shared/data/openb` next to the repo.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from federation.nodeplacement import DEFAULT_POLICY, POLICY_NAMES
from federation.scheduling import DEFAULT_CONFIG
from federation.simulation.dynamic import Timing, run_dynamic
from federation.simulation.study import SeedRun, run_seed
from federation.simulation.trace import load_nodes, load_pods

NODES_FILE = "openb_node_list_gpu_node.csv"
PODS_FILE = "openb_pod_list_default.csv"


def openb_dir() -> Path:
    """Where the shared openb files are."""
    env = os.environ.get("SUANPAN_OPENB_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "openb"


def parse_seeds(text: str) -> list[int]:
    """`42-51`, `42,45` or `42` as a list of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        try:
            seeds.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"bad seeds {text!r}; use e.g. 42-51 or 42,43"
            ) from None
    if not seeds:
        raise argparse.ArgumentTypeError("no seeds given")
    return seeds


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sim", description="Trace simulator")
    sub = parser.add_subparsers(dest="trace", required=True)
    openb = sub.add_parser("openb", help="Alibaba openb GPU trace (FGD paper protocol)")
    openb.add_argument("--nodes", type=Path, help=f"node CSV (default {NODES_FILE})")
    openb.add_argument("--pods", type=Path, help=f"pod CSV (default {PODS_FILE})")
    openb.add_argument("--policy", choices=POLICY_NAMES, default=DEFAULT_POLICY)
    openb.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"))
    openb.add_argument("--clusters", type=int, default=1, help="member clusters (default 1)")
    openb.add_argument("--workers", type=int, default=2, help="processes across seeds")
    openb.add_argument("--json", action="store_true", help="print one JSON object")
    openb.add_argument("--dynamic", action="store_true", help="replay arrival/deletion times")
    openb.add_argument(
        "--overload", type=float, help="dynamic: arrivals ask this many times the capacity"
    )
    openb.add_argument("--no-preemption", action="store_true", help="dynamic: never preempt")
    openb.add_argument(
        "--no-backfill", action="store_true", help="dynamic: no reservations for large pods"
    )
    openb.add_argument(
        "--runtime-factor",
        type=float,
        help="dynamic: pods declare their lifetime times this as maxRuntimeSeconds",
    )
    openb.add_argument(
        "--checkpoint-seconds", type=float, help="dynamic: pods checkpoint this often"
    )
    openb.add_argument(
        "--large-gpus", type=int, default=8, help="dynamic: GPUs of a pod that earns reservations"
    )
    return parser


def _seed_job(args: tuple[Path, Path, str, int, int]) -> SeedRun:
    nodes, pods, policy, seed, clusters = args
    return run_seed(load_nodes(nodes), load_pods(pods), policy, seed, clusters)


def _median(values: Sequence[float]) -> float | None:
    finite = [v for v in values if np.isfinite(v)]
    return round(float(np.median(finite)), 2) if finite else None


def static_summary(runs: Sequence[SeedRun]) -> dict[str, Any]:
    """Medians over seeds of the paper's headline numbers, plus per-seed values."""
    return {
        "unallocated_gpu_pct_at_100": _median([r.curves.unallocated_pct[100] for r in runs]),
        "frag_pct_of_idle_at_90": _median([r.curves.frag_ratio_pct[90] for r in runs]),
        "frag_pct_of_all_at_100": _median([r.curves.frag_pct[100] for r in runs]),
        "failed_pods": _median([r.failed_pods for r in runs]),
        "seed_runtime_s": round(float(np.mean([r.runtime_s for r in runs])), 2),
        "per_seed": [
            {
                "seed": r.seed,
                "unallocated_gpu_pct_at_100": _median([r.curves.unallocated_pct[100]]),
                "failed_pods": r.failed_pods,
                "runtime_s": round(r.runtime_s, 2),
            }
            for r in runs
        ],
    }


def main(argv: Sequence[str]) -> int:
    """Run the simulator; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(list(argv))
    nodes = args.nodes or openb_dir() / NODES_FILE
    pods = args.pods or openb_dir() / PODS_FILE
    for path in (nodes, pods):
        if not path.is_file():
            parser.error(f"{path} does not exist (set SUANPAN_OPENB_DIR or pass --nodes/--pods)")
    if args.clusters < 1:
        parser.error("--clusters must be >= 1")
    start = time.perf_counter()
    result: dict[str, Any] = {
        "policy": args.policy,
        "clusters": args.clusters,
        "pods_file": str(pods),
    }
    if args.dynamic:
        result["seeds"] = []
        run = run_dynamic(
            load_nodes(nodes),
            load_pods(pods),
            args.policy,
            config=replace(DEFAULT_CONFIG, preemption=not args.no_preemption),
            clusters=args.clusters,
            overload=args.overload,
            timing=Timing(
                backfill=not args.no_backfill,
                runtime_factor=args.runtime_factor,
                checkpoint_s=args.checkpoint_seconds,
                large_gpus=args.large_gpus,
            ),
        )
        result.update(run.summary())
    else:
        jobs = [(nodes, pods, args.policy, s, args.clusters) for s in args.seeds]
        if args.workers > 1 and len(jobs) > 1:
            with ProcessPoolExecutor(min(args.workers, len(jobs))) as ex:
                runs = list(ex.map(_seed_job, jobs))
        else:
            runs = [_seed_job(j) for j in jobs]
        result["seeds"] = args.seeds
        result.update(static_summary(runs))
    result["runtime_s"] = round(time.perf_counter() - start, 2)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            if key != "per_seed":
                print(f"{key:28s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
