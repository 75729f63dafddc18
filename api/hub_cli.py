"""`suanpan-hub`: run the hub (`serve`), apply database migrations (`migrate`), back its
database up (`backup`) and restore it (`restore`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import uvloop

from federation.aio import cancel_all
from federation.catalog import load_catalog
from federation.controllers.scheduler import SchedulerLoop
from federation.hubconfig import ConfigError, HubConfig, load_hub_config
from federation.logs import configure_logging
from federation.settings import HubSettings
from federation.store import backup, migrate
from federation.store.backfill import compile_uncompiled
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import DATABASE_DOWN, Database
from federation.store.embedded import (
    PG_BIN,
    EmbeddedError,
    EmbeddedPostgres,
    InUse,
    running_server,
)
from federation.store.listener import JOBS, Listener

log = logging.getLogger("suanpan.hub")
LOG_LEVEL_ENV = "SUANPAN_LOG_LEVEL"  # WARNING by default; INFO adds a line per request


# A hub keeps a large heap of long-lived objects (the catalog, the loop's decoded jobs and
# nodes, the API's emptied fleet) and makes many short-lived ones per request and per cycle;
# with CPython's default thresholds (700, 10, 10) the cyclic collector traversed that heap
# about once per cycle: 45% of the CPU of a cycle over 10,000 running jobs (1.1 s instead of
# 2.0-2.3 s with these). Memory is still freed by reference counting in between.
GC_THRESHOLDS = (100_000, 50, 100)


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run a hub process's `main` on uvloop with the hub's collector thresholds."""
    gc.set_threshold(*GC_THRESHOLDS)
    uvloop.run(main)


def embedded_dir(settings: HubSettings) -> Path:
    """Where the embedded PostgreSQL keeps its data."""
    return settings.data_dir / "postgres"


@contextlib.asynccontextmanager
async def server_url(settings: HubSettings, *, shared: bool = False) -> AsyncIterator[str]:
    """`DATABASE_URL`, or the embedded server on the data directory, started (migrated, earlier
    jobs compiled) for the block; with `shared`, a serving hub's embedded server as it runs."""
    if settings.database_url is not None:
        yield settings.database_url
        return
    embedded = EmbeddedPostgres(embedded_dir(settings))
    try:
        url = await embedded.start()
    except InUse:
        live = running_server(embedded.datadir)
        if not shared or live is None:
            raise
        yield str(live.get_uri())
        return
    try:
        await migrate.upgrade(url)
        await compile_uncompiled(url, load_catalog())
        yield url
    finally:
        await embedded.stop()


@contextlib.asynccontextmanager
async def database(settings: HubSettings) -> AsyncIterator[Database]:
    """The configured database, or the embedded one on the data directory."""
    async with server_url(settings) as url:
        if settings.database_url is None:
            log.warning("DATABASE_URL unset: embedded PostgreSQL in %s", embedded_dir(settings))
        db = Database(url)
        try:
            yield db
        finally:
            await db.close()


async def backup_to(settings: HubSettings, path: Path, pg_bin: Path) -> None:
    """Dump the hub's database to `path` (also while a hub serves from it)."""
    async with server_url(settings, shared=True) as url:
        await backup.dump(url, path, pg_bin)


async def restore_from(settings: HubSettings, path: Path, pg_bin: Path) -> None:
    """Load `path` into the hub's database (the embedded one only while no hub serves)."""
    async with server_url(settings) as url:
        await backup.restore(url, path, pg_bin)


async def serve(settings: HubSettings, config: HubConfig, loop_args: list[str]) -> None:
    """Serve the API until SIGINT/SIGTERM; unless API-only, with the scheduling loop in a child
    process (`loop_args`: its options)."""
    from aiohttp import web

    from api.app import create_app
    from api.context import CONTEXT
    from api.scheduling_process import scheduling_process
    from api.security import HubRunner
    from api.tls import ServerTLS

    async with database(settings) as db, contextlib.AsyncExitStack() as stack:
        while True:  # a hub started during a database outage waits for it, it never exits
            try:
                token = await ensure_admin_token(db, settings.admin_token)
                break
            except DATABASE_DOWN as exc:
                log.warning("database unavailable (%r); retrying", exc)
                await asyncio.sleep(1.0)
        if token is not None and settings.admin_token is None:
            print(f"first admin token (shown once): {token}", flush=True)
        app = create_app(db, catalog=load_catalog(), config=config)
        if settings.controllers:
            app[CONTEXT].loop_metrics = await stack.enter_async_context(
                scheduling_process(db.url, loop_args)
            )
        runner = HubRunner(app, access_log=None)
        await runner.setup()
        stop = asyncio.Event()
        tls = None
        if settings.tls_cert is not None and settings.tls_key is not None:
            tls = ServerTLS(settings.tls_cert, settings.tls_key, settings.client_ca)
        site = web.TCPSite(
            runner,
            settings.host,
            settings.port,
            reuse_port=True,
            ssl_context=tls.context if tls is not None else None,
        )
        await site.start()
        scheme = "https" if tls is not None else "http"
        log.warning("hub listening on %s://%s:%s", scheme, settings.host, settings.port)
        watcher = asyncio.create_task(tls.watch(stop)) if tls is not None else None
        _on_signals(stop)
        await stop.wait()
        if watcher is not None:
            await watcher
        await runner.cleanup()


def loop_database(url: str) -> Database:
    """The scheduling process's database: its few large statements are planned for the rows
    there are each time they run (`Database(custom_plans=...)`, docs/design-notes.md)."""
    return Database(url, custom_plans=True)


async def schedule(
    settings: HubSettings, config: HubConfig, metrics_file: Path | None, exit_with_stdin: bool
) -> None:
    """Run only the scheduling loop (competing for leadership) on `DATABASE_URL` until
    SIGINT/SIGTERM, or until standard input ends with `exit_with_stdin`."""
    from api.scheduling_process import stdin_closed, write_metrics_until

    assert settings.database_url is not None
    db = loop_database(settings.database_url)
    listener = Listener(settings.database_url)
    stop = asyncio.Event()
    _on_signals(stop)
    tasks = []
    if exit_with_stdin:
        tasks.append(asyncio.create_task(stdin_closed()))
        tasks[-1].add_done_callback(lambda _: stop.set())
    if metrics_file is not None:
        tasks.append(asyncio.create_task(write_metrics_until(stop, metrics_file)))
    try:
        await listener.start(JOBS)
        await SchedulerLoop(db, load_catalog(), config=config, listener=listener).run(stop)
    finally:
        stop.set()
        await cancel_all(tasks)
        await listener.close()
        await db.close()


def _on_signals(stop: asyncio.Event) -> None:
    """Set `stop` on SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


async def _migrate(url: str) -> str:
    """Migrate to the latest schema; say from where to where, or that nothing was to do."""
    before = await migrate.current_revision(url)
    await migrate.upgrade(url)
    after = await migrate.current_revision(url)
    if before == after:
        return f"database already at the latest schema ({after})"
    return f"database migrated from {before or 'an empty schema'} to {after} (the latest)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `suanpan-hub`."""
    parser = argparse.ArgumentParser(prog="suanpan-hub", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="run the hub API (and, as leader, its controllers)")
    run.add_argument("--host", help="listen address (default $SUANPAN_HOST or 127.0.0.1)")
    run.add_argument("--port", type=int, help="listen port (default $SUANPAN_PORT or 8080)")
    run.add_argument(
        "--api-only",
        action="store_true",
        help="serve the API without competing to lead the controllers",
    )
    loop = sub.add_parser(
        "schedule",
        help="run only the scheduling loop on $DATABASE_URL (what serve starts as its child)",
    )
    loop.add_argument("--metrics-file", type=Path, help="write the loop's metrics here each second")
    loop.add_argument(
        "--exit-with-stdin", action="store_true", help="stop when standard input ends"
    )
    for one in (run, loop):
        one.add_argument(
            "--config",
            type=Path,
            help="scheduling configuration file (YAML, see docs/operator-guide.md; "
            "default $SUANPAN_CONFIG, else built-in defaults)",
        )
    for flag, env, text in (
        ("--tls-cert", "SUANPAN_TLS_CERT", "serve HTTPS with this certificate (PEM chain)"),
        ("--tls-key", "SUANPAN_TLS_KEY", "the certificate's private key (PEM)"),
        ("--client-ca", "SUANPAN_CLIENT_CA", "accept client certificates signed by this CA"),
    ):
        run.add_argument(flag, type=Path, help=f"{text} (default ${env})")
    sub.add_parser("migrate", help="apply database migrations to $DATABASE_URL")
    with_data = [run]
    for name, verb in (("backup", "write the database to"), ("restore", "load the database from")):
        one = sub.add_parser(name, help=f"{verb} FILE (pg_dump custom format)")
        with_data.append(one)
        one.add_argument("file", type=Path, metavar="FILE")
        one.add_argument(
            "--pg-bin",
            type=Path,
            default=PG_BIN,
            help="directory of pg_dump/pg_restore, at least the server's major version"
            " (default: PostgreSQL 16 shipped with pgserver)",
        )
    for one in with_data:
        one.add_argument(
            "--data-dir",
            type=Path,
            help="embedded PostgreSQL's home without DATABASE_URL"
            " (default $SUANPAN_DATA_DIR or $XDG_DATA_HOME/suanpan)",
        )
    args = parser.parse_args(argv)
    configure_logging(os.environ.get(LOG_LEVEL_ENV, "WARNING").upper())
    settings = HubSettings.from_env()
    if args.command in ("migrate", "schedule") and settings.database_url is None:
        print(f"suanpan-hub {args.command}: set DATABASE_URL", file=sys.stderr)
        return 2
    if args.command == "migrate":
        assert settings.database_url is not None
        print(asyncio.run(_migrate(settings.database_url)))
        compiled, failed = asyncio.run(compile_uncompiled(settings.database_url, load_catalog()))
        if compiled or failed:
            print(f"compiled {compiled} earlier jobs; {failed} could not be and were failed")
        return 0
    if args.command in ("schedule", "serve"):
        try:
            config = load_hub_config(args.config or settings.config_path)
        except ConfigError as exc:
            print(f"suanpan-hub: configuration: {exc}", file=sys.stderr)
            return 2
    if args.command == "schedule":
        _run(schedule(settings, config, args.metrics_file, args.exit_with_stdin))
        return 0
    if args.data_dir is not None:
        settings = replace(settings, data_dir=args.data_dir)
    if args.command in ("backup", "restore"):
        action = backup_to if args.command == "backup" else restore_from
        try:
            asyncio.run(action(settings, args.file, args.pg_bin))
        except (EmbeddedError, backup.BackupError) as exc:
            print(f"suanpan-hub {args.command}: {exc}", file=sys.stderr)
            return 1
        print(f"{args.command}: {args.file}")
        return 0
    settings = replace(
        settings,
        host=args.host or settings.host,
        port=args.port or settings.port,
        controllers=not args.api_only,
        tls_cert=args.tls_cert or settings.tls_cert,
        tls_key=args.tls_key or settings.tls_key,
        client_ca=args.client_ca or settings.client_ca,
    )
    if (settings.tls_cert is None) != (settings.tls_key is None):
        print("suanpan-hub: give both a TLS certificate and its key", file=sys.stderr)
        return 2
    loop_args = ["--config", str(args.config)] if args.config is not None else []
    _run(serve(settings, config, loop_args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
