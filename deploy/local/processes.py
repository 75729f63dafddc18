"""Start and stop long-running component processes, each in its own process group.

A started process is described by a `ProcessRecord` that can be written to JSON and
read back by another invocation (`suanpan-dev clusters down`), so processes outlive
the command that started them.  The kernel start time of the pid is recorded too, so
a recycled pid is never signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

STOP_TIMEOUT_S = 10.0
_POLL_S = 0.05


@dataclass(frozen=True)
class ProcessRecord:
    """A spawned process: its role, pid (= process-group id) and kernel start time."""

    name: str
    pid: int
    start_ticks: int
    argv: tuple[str, ...]
    log: str

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        data = asdict(self)
        data["argv"] = list(self.argv)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessRecord:
        """Inverse of `to_json`."""
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_ticks=int(data["start_ticks"]),
            argv=tuple(str(a) for a in data["argv"]),
            log=str(data["log"]),
        )


def _stat(pid: int) -> tuple[str, int, int] | None:
    """Return (state, pgrp, start_ticks) of pid from /proc, or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[2]), int(fields[19])


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def spawn(
    name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str], cwd: Path
) -> ProcessRecord:
    """Start argv detached in a new session (own process group), output to log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    st = _stat(proc.pid)
    if st is None:
        raise RuntimeError(f"{name} exited immediately; see {log_path}")
    return ProcessRecord(name, proc.pid, st[2], tuple(argv), str(log_path))


def is_running(rec: ProcessRecord) -> bool:
    """True if the recorded process is alive (not a zombie, not a recycled pid)."""
    _reap(rec.pid)
    st = _stat(rec.pid)
    return st is not None and st[2] == rec.start_ticks and st[0] not in ("Z", "X")


def _group_members(pgids: set[int]) -> set[int]:
    """Pids of live (non-zombie) processes whose process group is in pgids."""
    found: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        st = _stat(int(entry.name))
        if st is not None and st[1] in pgids and st[0] not in ("Z", "X"):
            found.add(int(entry.name))
    return found


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def stop(records: Sequence[ProcessRecord], timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
    """SIGTERM the process groups of records, wait up to timeout_s, then SIGKILL.

    Returns the names of processes that needed SIGKILL.  Records whose pid now
    belongs to another process are skipped.
    """
    ours = [r for r in records if is_running(r)]
    pgids = {r.pid for r in ours}
    for r in ours:
        _signal_group(r.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while True:
        for r in ours:
            _reap(r.pid)
        alive = _group_members(pgids)
        if not alive:
            return []
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(_POLL_S)
    killed = [r.name for r in ours if _group_members({r.pid})]
    for pgid in pgids:
        _signal_group(pgid, signal.SIGKILL)
    while _group_members(pgids):
        for r in ours:
            _reap(r.pid)
        await asyncio.sleep(_POLL_S)
    return killed


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int) -> list[int]:
    """Return `count` distinct TCP ports on 127.0.0.1 that are free right now.

    Ports are drawn below the kernel's ephemeral range, so outgoing connections of
    the components themselves cannot take them between choice and bind.
    """
    low, high = 20000, _ephemeral_low() - 1
    if high - low < count * 4:
        low = 1024
    rng = random.SystemRandom()
    chosen: list[int] = []
    while len(chosen) < count:
        port = rng.randint(low, high)
        if port in chosen:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        chosen.append(port)
    return chosen


def port_in_use(port: int) -> bool:
    """True if something listens on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0
