"""A throw-away PostgreSQL server for demos and tests when `DATABASE_URL` is unset."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def _ensure_runtime_dir() -> None:
    """pgserver keeps its lock file in the user's runtime directory; where the session has none
    (`XDG_RUNTIME_DIR` unset: containers, cron, ssh without a login session) give it one,
    private to this user, rather than a warning from platformdirs on every start."""
    if not os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(tempfile.gettempdir()) / f"suanpan-runtime-{os.getuid()}"
        path.mkdir(mode=0o700, exist_ok=True)
        path.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(path)


class EmbeddedPostgres:
    """A real PostgreSQL 16 server in a temporary folder, listening on a unix socket only."""

    def __init__(self, datadir: Path | None = None) -> None:
        self._owns_dir = datadir is None
        self.datadir = datadir or Path(tempfile.mkdtemp(prefix="suanpan-pg-"))
        self._server: Any = None

    async def start(self) -> str:
        """Start the server (initdb on first use) and return its connection URL."""
        _ensure_runtime_dir()
        from pgserver import get_server  # type: ignore[attr-defined]  # imported only when used

        self._server = await asyncio.to_thread(get_server, self.datadir, cleanup_mode="stop")
        return str(self._server.get_uri())

    async def stop(self) -> None:
        """Stop the server; remove its data folder when this object created it."""
        if self._server is not None:
            await asyncio.to_thread(self._server.cleanup)
            self._server = None
        if self._owns_dir:
            shutil.rmtree(self.datadir, ignore_errors=True)
