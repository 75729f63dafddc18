"""Parsing helpers shared by the vendor tool parsers.

Vendor tools print three shapes: box tables in the style of nvidia-smi (`table_blocks`),
"key : value" reports split into one block per device (`key_value_blocks`) and CSV rows from
`--query-gpu` style options (`csv_rows`). Memory amounts come in many spellings (`mib`).
"""

from __future__ import annotations

import csv
import re
from decimal import Decimal, InvalidOperation

_BORDER = re.compile(r"^\s*[-=+|]{3,}\s*$")  # "+----+----+", "|=====|", "-------"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GIB = 1 / Decimal(1024)
_UNITS_PER_MIB = {  # units are read as binary: "MB" is MiB
    "b": Decimal(1024**2),
    **dict.fromkeys(("k", "kb", "kib"), Decimal(1024)),
    **dict.fromkeys(("", "m", "mb", "mib"), Decimal(1)),
    **dict.fromkeys(("g", "gb", "gib"), _GIB),
}
_AMOUNT = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]*)$")

Row = list[str]


def strip_ansi(text: str) -> str:
    """The text without terminal colour codes."""
    return _ANSI.sub("", text)


def table_blocks(text: str) -> list[list[Row]]:
    """Split a box table into blocks of rows; a row is the line's cells between '|'.

    Border lines ("+---+", "|===|", "-----") and blank lines end a block. The outer '|' of a
    line are dropped and cells are stripped, so "| 0   910B3 | OK |" is ["0   910B3", "OK"]
    and "0    MTT S4000 |00:3b.0" (no outer bars) is ["0    MTT S4000", "00:3b.0"].
    A line without any '|' is a one-cell row.
    """
    blocks: list[list[Row]] = []
    current: list[Row] = []
    for line in strip_ansi(text).splitlines():
        if _BORDER.match(line) or not line.strip():
            if current:
                blocks.append(current)
            current = []
            continue
        body = line.strip()
        body = body[1:] if body.startswith("|") else body
        body = body[:-1] if body.endswith("|") else body
        current.append([cell.strip() for cell in body.split("|")])
    if current:
        blocks.append(current)
    return blocks


def key_value_blocks(text: str, header: re.Pattern[str]) -> dict[int, dict[str, str]]:
    """Per-device "key : value" reports, keyed by the device number `header` captures.

    A line matching `header` (group 1 = device number) starts a device; what follows the match
    on that line, if any, is read as "key: value" too (hy-smi's "DCU[0] : Card Series: X").
    A key without a value (or a line without ':') opens a section for the lines indented
    below it: "Physical Memory Usage :" then "    Total : 23374 MiB" gives the key
    "physical memory usage/total". Keys are lower case; lines before the first device are
    ignored.
    """
    devices: dict[int, dict[str, str]] = {}
    block: dict[str, str] | None = None
    sections: list[tuple[int, str]] = []
    for line in strip_ansi(text).splitlines():
        match = header.match(line)
        if match:
            block = devices.setdefault(int(match.group(1)), {})
            sections = []
            line = line[match.end() :]
        if block is None or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while sections and sections[-1][0] >= indent:
            sections.pop()
        key, sep, value = line.strip().partition(":")
        key, value = key.strip().lower(), value.strip()
        if sep and value:
            block["/".join([s for _, s in sections] + [key])] = value
        else:
            sections.append((indent, key))
    return devices


def csv_rows(text: str) -> list[Row]:
    """Non-empty CSV rows with stripped cells."""
    return [[c.strip() for c in row] for row in csv.reader(text.splitlines()) if row]


def mib(amount: str) -> int | None:
    """MiB in one amount ("81559", "23374 MiB", "49120MiB", "64 GB", "68702699520 B").

    A bare number is MiB. Returns None for what is no amount
    ("N/A", "ERR!", "[GPU requires reset]").
    """
    match = _AMOUNT.match(amount.strip().lower())
    if match is None or match.group(2) not in _UNITS_PER_MIB:
        return None
    try:
        return int(Decimal(match.group(1)) / _UNITS_PER_MIB[match.group(2)])
    except InvalidOperation:
        return None
