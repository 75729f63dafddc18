"""Backups of the hub's database with pg_dump/pg_restore (custom format, schema and data)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from sqlalchemy.engine import make_url

from federation.store.embedded import PG_BIN


class BackupError(RuntimeError):
    """pg_dump or pg_restore failed."""


def _libpq(url: str) -> tuple[str, dict[str, str]]:
    """`url` as libpq takes it (no driver), and the environment carrying its password, which
    must not show on a command line."""
    parsed = make_url(url)
    env = dict(os.environ)
    if parsed.password:
        env["PGPASSWORD"] = str(parsed.password)
    plain = parsed.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


async def _run(tool: str, pg_bin: Path, *args: str, url: str) -> None:
    dsn, env = _libpq(url)
    proc = await asyncio.create_subprocess_exec(
        str(pg_bin / tool), *args, f"--dbname={dsn}", env=env, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise BackupError(f"{tool} failed (exit code {proc.returncode}): {err.decode().strip()}")


async def dump(url: str, path: Path, pg_bin: Path = PG_BIN) -> None:
    """Write a consistent snapshot of the database at `url` to `path`."""
    await _run("pg_dump", pg_bin, "--format=custom", f"--file={path}", url=url)


async def restore(url: str, path: Path, pg_bin: Path = PG_BIN) -> None:
    """Replace what `path` holds in the database at `url` (in one transaction)."""
    await _run(
        "pg_restore",
        pg_bin,
        "--clean",
        "--if-exists",
        "--no-owner",
        "--no-privileges",
        "--single-transaction",
        "--exit-on-error",
        str(path),
        url=url,
    )
