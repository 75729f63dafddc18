"""The scheduling loop in a process of its own, started and supervised by `suanpan-hub serve`.

The API's event loop never runs a scheduling cycle: on a busy hub the two no longer share one
core's time or one interpreter lock. The child (`suanpan-hub schedule --exit-with-stdin`)
competes for leadership like any replica, stops when its parent's pipe closes (so a `kill -9`
of the hub takes its loop down and frees the leadership lock at once), and writes its metrics to a
file the parent's `/metrics` relays. A child that dies is started again after a pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from federation.aio import cancel_all
from federation.metrics import LOOP_REGISTRY, write_exposition

log = logging.getLogger("suanpan.hub")
RESTART_PAUSE_S = 1.0
STOP_GRACE_S = 10.0
METRICS_INTERVAL_S = 1.0


def relayed_metrics(path: Path) -> Callable[[], bytes]:
    """The loop's exposition as its process last wrote it (nothing before its first write)."""

    def read() -> bytes:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return b""

    return read


async def _supervise(url: str, args: list[str], metrics: Path) -> None:
    """Run the child until cancelled; start it again whenever it exits."""
    env = {**os.environ, "DATABASE_URL": url}
    command = [sys.executable, "-m", "api.hub_cli", "schedule", "--exit-with-stdin"]
    command += ["--metrics-file", str(metrics), *args]
    while True:
        child = await asyncio.create_subprocess_exec(
            *command, env=env, stdin=asyncio.subprocess.PIPE
        )
        try:
            code = await child.wait()
        except asyncio.CancelledError:
            await _stop(child)
            raise
        log.warning("scheduling process exited (%s); starting it again", code)
        await asyncio.sleep(RESTART_PAUSE_S)


async def _stop(child: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL after the grace period."""
    if child.returncode is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(child.wait(), STOP_GRACE_S)
    except TimeoutError:
        child.kill()
        await child.wait()


@contextlib.asynccontextmanager
async def scheduling_process(url: str, args: list[str]) -> AsyncIterator[Callable[[], bytes]]:
    """Run the loop in a child process on database `url` for the block (`args`: its options,
    e.g. `--config`); yields the reader of its metrics for `/metrics`."""
    with tempfile.TemporaryDirectory(prefix="suanpan-loop-") as tmp:
        metrics = Path(tmp) / "metrics.prom"
        supervisor = asyncio.create_task(_supervise(url, args, metrics))
        try:
            yield relayed_metrics(metrics)
        finally:
            await cancel_all([supervisor])


async def stdin_closed() -> None:
    """Return when standard input reaches its end (the parent closed the pipe or died)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.read(4096):
        pass


async def write_metrics_until(stop: asyncio.Event, path: Path) -> None:
    """Write the loop's exposition to `path` every second until `stop`, and once more then."""
    while not stop.is_set():
        write_exposition(LOOP_REGISTRY, path)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), METRICS_INTERVAL_S)
    write_exposition(LOOP_REGISTRY, path)
