"""Matplotlib figures of the placement and overload studies (PNG files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt

Curve = npt.NDArray[np.float64]


def allocation_vs_arrival(
    ours: Mapping[str, Curve], authors: Mapping[str, Curve], title: str, path: Path
) -> Path:
    """GPU allocation ratio against arrived workload per policy (the paper's Fig. 9(a)):
    ours solid, the authors' dashed in the same color."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    x = np.arange(len(next(iter(ours.values()))))
    for k, (policy, curve) in enumerate(ours.items()):
        color = f"C{k}"
        ax.plot(x, curve, color=color, label=policy)
        if policy in authors:
            ax.plot(x, authors[policy], color=color, linestyle="--", linewidth=0.8)
    ax.plot(x, np.minimum(x, 100), color="grey", linewidth=0.5, label="ideal")
    ax.set_xlim(80, 130)
    ax.set_ylim(75, 100)
    ax.set_xlabel("arrived workload (% of cluster GPUs)")
    ax.set_ylabel("GPU allocation ratio (%)")
    ax.set_title(f"{title} (dashed: authors' medians)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def unallocated_bars(
    variants: Sequence[str], series: Mapping[str, Sequence[float]], path: Path
) -> Path:
    """Unallocated GPU % at 100 % arrived, one group of bars per trace variant."""
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(variants))
    for k, (label, values) in enumerate(series.items()):
        ax.bar(x + k * width, values, width, label=label)
    ax.set_xticks(x + width * (len(series) - 1) / 2, variants, rotation=30, fontsize=8)
    ax.set_ylabel("unallocated GPUs at 100 % arrived (%)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def over_time(
    panels: Mapping[str, Mapping[str, tuple[Curve, Curve]]], ylabel: str, path: Path
) -> Path:
    """One panel per title, one step line per setup: (times in s, values) against hours."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.5), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels.items(), strict=True):
        for name, (t, v) in series.items():
            ax.step((t - t[0]) / 3600.0, v, where="post", label=name, linewidth=0.8)
        ax.set(xlabel="hours since the first arrival", ylabel=ylabel, title=title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def class_bars(
    panels: Mapping[str, Mapping[str, Sequence[float]]],
    classes: Sequence[str],
    ylabel: str,
    path: Path,
) -> Path:
    """One panel per title; per class a group of bars, one per setup (log scale)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.5), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels.items(), strict=True):
        width = 0.8 / max(len(series), 1)
        x = np.arange(len(classes))
        for k, (name, values) in enumerate(series.items()):
            ax.bar(x + k * width, np.maximum(values, 1.0), width, label=name)
        ax.set_xticks(x + width * (len(series) - 1) / 2, classes)
        ax.set(ylabel=ylabel, title=title, yscale="log")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def series_over_seconds(
    curves: Mapping[str, tuple[Curve, Curve]], ylabel: str, title: str, path: Path
) -> Path:
    """One panel of step lines (times in s, values) against seconds."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name, (t, v) in curves.items():
        ax.step(t, v, where="post", label=name, linewidth=1.0)
    ax.set(xlabel="seconds", ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
