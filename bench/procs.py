"""What benchmarks read from /proc about the processes they start: CPU time and memory."""

from __future__ import annotations

import os
from pathlib import Path


def matching(match: str) -> list[Path]:
    """The /proc entries of every process whose command line contains `match`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if match in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(proc)
        except OSError:
            continue
    return found


def cpu_seconds(match: str) -> float:
    """User+system CPU seconds of every process whose command line contains `match`."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for proc in matching(match):
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def rss_mib(proc: Path) -> float:
    """Resident memory of the process at `proc` (/proc/<pid>); 0 once it is gone."""
    try:
        status = (proc / "status").read_text().splitlines()
    except OSError:
        return 0.0
    return sum(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024
