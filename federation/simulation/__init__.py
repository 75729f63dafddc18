"""Trace simulator: the openb loader, the FGD paper's protocol, replays and their metrics."""

from federation.simulation.dynamic import DynamicResult, Timing, run_dynamic
from federation.simulation.hub import Hub, split_round_robin
from federation.simulation.metrics import Curves, Trajectory, discretize
from federation.simulation.multicluster import TwoLevelPlacer
from federation.simulation.protocol import PAPER_SEEDS, TUNE_RATIO, tune_workload
from federation.simulation.replay import Placement, Placer, ReplayOutcome, replay
from federation.simulation.study import SeedRun, run_seed
from federation.simulation.trace import TraceNode, TracePod, load_nodes, load_pods

__all__ = [
    "PAPER_SEEDS",
    "TUNE_RATIO",
    "Curves",
    "DynamicResult",
    "Hub",
    "Placement",
    "Placer",
    "ReplayOutcome",
    "SeedRun",
    "Timing",
    "TraceNode",
    "TracePod",
    "Trajectory",
    "TwoLevelPlacer",
    "discretize",
    "load_nodes",
    "load_pods",
    "replay",
    "run_dynamic",
    "run_seed",
    "split_round_robin",
    "tune_workload",
]
