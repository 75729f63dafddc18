"""The authors' results (upstream `experiments/analysis/expected_results/*.csv`), as medians.

Rows are `workload,sc_policy,tune,seed,[total_gpus,]0..130`; we key them by our variant name
(`default` for `openb_pod_list_default`) and our policy name.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from federation.nodeplacement.pool import FloatArray
from federation.simulation.metrics import POINTS

AUTHOR_POLICIES = {
    "01-Random": "random",
    "02-DotProd": "dotprod",
    "03-GpuClustering": "clustering",
    "04-GpuPacking": "packing",
    "05-BestFit": "bestfit",
    "06-FGD": "fgd",
}
FILES = {
    "alloc": "analysis_allo_discrete.csv",
    "frag": "analysis_frag_discrete.csv",
    "frag_ratio": "analysis_frag_ratio_discrete.csv",
}


def variant_of(workload: str) -> str:
    """`openb_pod_list_gpushare40` -> `gpushare40`."""
    return workload.removeprefix("openb_pod_list_")


def load_medians(directory: Path, metric: str = "alloc") -> dict[tuple[str, str], FloatArray]:
    """Median over seeds of the authors' curve per (variant, policy), NaN where missing."""
    rows: dict[tuple[str, str], list[FloatArray]] = {}
    with (directory / FILES[metric]).open(newline="") as f:
        for row in csv.DictReader(f):
            key = (variant_of(row["workload"]), AUTHOR_POLICIES[row["sc_policy"]])
            curve = np.array(
                [float(row[str(x)]) if row.get(str(x)) else np.nan for x in range(POINTS)]
            )
            rows.setdefault(key, []).append(curve)
    return {key: np.nanmedian(np.vstack(curves), axis=0) for key, curves in rows.items()}
