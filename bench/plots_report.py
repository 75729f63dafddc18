"""Plots of the throughput figures (the placement study draws its own)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.results import Figure


def draw(figures: Sequence[Figure], out: Path) -> list[Path]:
    """Draw API throughput and latency against concurrency, when those figures exist."""
    by_name = {f.name: f for f in figures}
    prefix = "api_submissions_per_s_c"
    clients = sorted(  # the empty-queue rounds (the backlog round has a suffix)
        int(n[len(prefix) :])
        for n in by_name
        if n.startswith(prefix) and n[len(prefix) :].isdigit()
    )
    if not clients:
        return []
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(clients, [by_name[f"api_submissions_per_s_c{c}"].value for c in clients], "o-")
    left.axhline(2000, color="grey", linestyle="--", label="aim 2,000/s")
    left.set(xlabel="concurrent clients", ylabel="submissions/s", title="Throughput", xscale="log")
    left.legend()
    for pct in ("p50", "p99"):
        right.plot(
            clients, [by_name[f"api_submit_{pct}_ms_c{c}"].value for c in clients], "o-", label=pct
        )
    right.axhline(50, color="grey", linestyle="--", label="aim p99 50 ms")
    right.set(
        xlabel="concurrent clients", ylabel="ms", title="Submit latency", xscale="log", yscale="log"
    )
    right.legend()
    fig.tight_layout()
    path = out / "api_throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
