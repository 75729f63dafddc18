"""How the CLI prints what the hub answers: aligned plain-text tables, or JSON or YAML."""

from __future__ import annotations

import json
from typing import Any

import yaml


def table(rows: list[list[Any]], header: list[str]) -> str:
    """Rows as an aligned plain-text table."""
    cells = [header, *[[("" if c is None else str(c)) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def emit(data: Any, fmt: str, rows: list[list[Any]], header: list[str]) -> None:
    """`data` as JSON or YAML (`-o json|yaml`), else `rows` as a table under `header`."""
    if fmt == "json":
        print(json.dumps(data, indent=2))
    elif fmt == "yaml":
        print(yaml.safe_dump(data, sort_keys=False), end="")
    else:
        print(table(rows, header))


def indented(rows: list[list[Any]], header: list[str]) -> None:
    """A table printed under a heading of `describe`, two spaces in."""
    for line in table(rows, header).splitlines():
        print(f"  {line}")
