"""The hub's embedded PostgreSQL when `DATABASE_URL` is unset: persistent in a data directory,
or throw-away (demos, tests).

The server (PostgreSQL 16 from pgserver) listens on a unix socket only and runs as a child of
this process with a parent-death signal: a hub killed with SIGKILL takes its server down with a
fast shutdown, so nothing is orphaned.  An exclusive lock on `<datadir>/../<name>.lock` keeps a
second hub off the same data; whoever holds it may stop a server left running on that data by
an older process (no other hub can be using it), which the next start does.
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from pgserver._commands import POSTGRES_BIN_PATH
from pgserver.utils import (
    PostmasterInfo,
    ensure_folder_permissions,
    ensure_prefix_permissions,
    ensure_user_exists,
    find_suitable_socket_dir,
)

PG_BIN = Path(POSTGRES_BIN_PATH)
RUNTIME_DIR = Path(tempfile.gettempdir()) / f"suanpan-pg-sockets-{os.getuid()}"
SYSTEM_USER = "pgserver"  # PostgreSQL refuses to run as root; pgserver's user then
_PR_SET_PDEATHSIG = 1


class EmbeddedError(RuntimeError):
    """The embedded server could not be started."""


class InUse(EmbeddedError):
    """Another process (a serving hub) holds the data directory."""


def _die_with_parent() -> None:
    """In the child, after its uid is set: SIGINT (fast shutdown) when the parent dies (Linux)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


def running_server(datadir: Path) -> PostmasterInfo | None:
    """The live server `datadir/postmaster.pid` names, if any (none while it is half written)."""
    try:
        info = PostmasterInfo.read_from_pgdata(datadir)
    except (AssertionError, ValueError, OSError):
        return None
    return info if info is not None and info.is_running() else None


class EmbeddedPostgres:
    """A PostgreSQL server on `datadir` (kept), or in a temporary folder (deleted on stop)."""

    def __init__(self, datadir: Path | None = None) -> None:
        self._scratch: Path | None = None  # throw-away: holds the data and the lock file
        if datadir is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="suanpan-pg-"))
            datadir = self._scratch / "data"
        self.datadir = datadir.resolve()
        self._user = SYSTEM_USER if os.geteuid() == 0 else None
        self._lock: IO[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (its backends are its children)."""
        return self._proc.pid if self._proc is not None else None

    async def start(self, timeout_s: float = 60.0) -> str:
        """Lock the data directory, initdb on first use, start the server, return its URL."""
        try:
            await asyncio.to_thread(self._prepare)
            self._spawn()
            return await self._ready(timeout_s)
        except BaseException:
            await self.stop()
            raise

    def _prepare(self) -> None:
        """Lock and own the data directory; stop a stale server; initdb if empty."""
        self.datadir.parent.mkdir(parents=True, exist_ok=True)
        lock = open(self.datadir.parent / f"{self.datadir.name}.lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise InUse(f"{self.datadir} is in use by another hub") from None
        self._lock = lock
        self.datadir.mkdir(exist_ok=True)
        if self._user is not None:
            ensure_user_exists(self._user)
            ensure_prefix_permissions(self.datadir)
            ensure_prefix_permissions(PG_BIN)
            readable = stat.S_IRGRP | stat.S_IROTH
            ensure_folder_permissions(PG_BIN, readable | stat.S_IXGRP | stat.S_IXOTH)
            ensure_folder_permissions(PG_BIN.parent / "lib", readable)
            shutil.chown(self.datadir, self._user, self._user)
        if running_server(self.datadir) is not None:
            # We hold the lock, so no hub uses it: a leftover of a process killed before the
            # parent-death signal was set (or of an older release that ran pg_ctl).
            self._run("pg_ctl", "-D", str(self.datadir), "-m", "fast", "-w", "stop")
        if not (self.datadir / "PG_VERSION").exists():
            self._run(
                "initdb", "-D", str(self.datadir), "--auth=trust", "-E", "utf8", "-U", "postgres"
            )

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [str(PG_BIN / tool), *args],
            user=self._user,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise EmbeddedError(f"{tool} {' '.join(args)} failed: {done.stderr.strip()}")

    def _spawn(self) -> None:
        """Start postgres as our child, from this (the event loop's) thread: the parent-death
        signal follows the thread that forked, and worker threads come and go."""
        socket_dir = find_suitable_socket_dir(self.datadir, RUNTIME_DIR)
        if self._user is not None and socket_dir != self.datadir:
            shutil.chown(socket_dir, self._user)
        with open(self.datadir / "log", "ab") as log:
            self._proc = subprocess.Popen(
                [
                    str(PG_BIN / "postgres"),
                    "-D",
                    str(self.datadir),
                    "-h",
                    "",
                    "-k",
                    str(socket_dir),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                user=self._user,
                start_new_session=True,  # a terminal's Ctrl-C goes to the hub, which stops us
                preexec_fn=_die_with_parent,  # only ctypes.prctl: fork-safe
            )

    async def _ready(self, timeout_s: float) -> str:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            info = running_server(self.datadir)
            if info is not None and info.pid == self._proc.pid and info.status == "ready":
                return str(info.get_uri())
            await asyncio.sleep(0.1)
        tail = (self.datadir / "log").read_text(errors="replace")[-2000:]
        raise EmbeddedError(f"PostgreSQL on {self.datadir} did not start:\n{tail}")

    async def stop(self) -> None:
        """Fast-shut the server down, release the lock, delete a throw-away data folder."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                await asyncio.to_thread(proc.wait, 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait)
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
