"""The benchmark contract: every figure is one JSON file `bench/results/<name>.json`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Figure:
    """One measured figure, trackable over time."""

    name: str
    value: float
    unit: str
    higher_is_better: bool
    params: dict[str, Any] = field(default_factory=dict)
    measured_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())


def write_figure(figure: Figure, results_dir: Path = RESULTS_DIR) -> Path:
    """Write one figure as `<results_dir>/<name>.json` and return the path."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{figure.name}.json"
    path.write_text(json.dumps(asdict(figure), indent=2, sort_keys=True) + "\n")
    return path
