"""What benchmarks read from /proc about the processes they start: CPU time and memory.

Processes are named by the id of one a benchmark started and counted with their descendants
(a hub's scheduling child, PostgreSQL's backends), never by command line: other hubs and
servers on the machine must not count.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path


def _parent(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            parent = _parent(proc)
            if parent is not None:
                children.setdefault(parent, []).append(int(proc.name))
    return children


def tree(*roots: int) -> list[int]:
    """`roots` and every process descending from them, as they run now."""
    children = _children()
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def descendants(*roots: int) -> list[int]:
    """Every process descending from `roots` (not the roots), as they run now."""
    return [pid for pid in tree(*roots) if pid not in roots]


def cpu_seconds(pids: Iterable[int]) -> float:
    """User+system CPU seconds of the processes `pids` (those gone count 0)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def waiting_seconds(pid: int) -> float:
    """Seconds the threads of process `pid` spent runnable but waiting for a CPU (the
    scheduler's run queue, `/proc/PID/task/*/schedstat`); 0 once it is gone or unknown."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += int((task / "schedstat").read_text().split()[1])
    except OSError:
        return 0.0
    return total / 1e9


class CpuMeter:
    """CPU seconds spent by named groups of processes between `start` and `stop`, and seconds
    they waited for a CPU meanwhile (`waited`); each group is a function listing its processes
    (read at both ends: a process that starts in between, a new database backend, counts from
    its start; one that ends in between counts nothing)."""

    def __init__(self, **groups: Callable[[], Iterable[int]]) -> None:
        self._groups = groups
        self._begin: dict[str, dict[int, tuple[float, float]]] = {}
        self.waited: dict[str, float] = {}  # by group, once stopped

    def _read(self) -> dict[str, dict[int, tuple[float, float]]]:
        return {
            name: {pid: (cpu_seconds([pid]), waiting_seconds(pid)) for pid in pids()}
            for name, pids in self._groups.items()
        }

    def start(self) -> None:
        """Read every group's CPU and waiting times now."""
        self._begin = self._read()

    def stop(self) -> dict[str, float]:
        """CPU seconds of each group since `start` (and its waits, in `waited`)."""
        used: dict[str, float] = {}
        for name, pids in self._read().items():
            begin = self._begin[name]
            used[name] = self.waited[name] = 0.0
            for pid, (cpu, wait) in pids.items():
                cpu_then, wait_then = begin.get(pid, (0.0, 0.0))
                used[name] += cpu - cpu_then
                self.waited[name] += wait - wait_then
        return used


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid`; 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0.0
    return sum(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024
