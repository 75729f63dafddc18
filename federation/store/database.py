"""Connection to the hub's PostgreSQL: an async SQLAlchemy engine over asyncpg."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg
import orjson
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

# what a lost, cut off or restarting PostgreSQL raises through SQLAlchemy and asyncpg
DATABASE_DOWN = (
    OSError,
    TimeoutError,
    sa_exc.TimeoutError,
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.InterfaceError,
)


async def fetch_records(conn: AsyncConnection, stmt: sa.Select[Any]) -> list[asyncpg.Record]:
    """The rows of `stmt` straight from asyncpg, in `conn`'s transaction.

    For the scheduling loop's scans of many narrow rows (job ids and stamps), where building
    SQLAlchemy's rows costs five times the fetch (20,000 rows of an id and a text: 60 ms
    against 12 ms of CPU). A record is indexed by position or column name, not by attribute,
    and no SQLAlchemy type processing runs: only for ids, texts and numbers.
    """
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    args = [params[name] for name in compiled.positiontup or ()]
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None  # a connection in use has its asyncpg connection
    records: list[asyncpg.Record] = await driver.fetch(str(compiled), *args)
    return records


# what asyncpg raises on a connection whose server session ended while this process was
# frozen (SIGSTOP, a paused VM): "cannot switch to state N; another operation is in progress"
SESSION_LOST = (*DATABASE_DOWN, asyncpg.InternalClientError)


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` says PostgreSQL cannot be reached now (not that it refused a statement):
    one of `DATABASE_DOWN`, or SQLAlchemy's wrapper of a connection lost mid-statement or of
    a session the server ended under a frozen process."""
    if isinstance(exc, DATABASE_DOWN):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        driver = exc.orig
        return exc.connection_invalidated or isinstance(
            driver.__cause__ if driver is not None else None, SESSION_LOST
        )
    return False


# what PostgreSQL rolls back for a collision with another transaction (a deadlock, a
# serialization failure): nothing was written, and the same request may simply be sent again
COLLISIONS = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)


def is_collision(exc: BaseException) -> bool:
    """Whether `exc` is SQLAlchemy's wrapper of a transaction PostgreSQL rolled back because it
    collided with another (SQLSTATE 40P01 or 40001)."""
    if not isinstance(exc, sa_exc.DBAPIError) or exc.orig is None:
        return False
    return isinstance(exc.orig.__cause__, COLLISIONS)


T = TypeVar("T")
COLLISION_TRIES = 3


async def retrying_collisions(attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt()`, made again at once (up to `COLLISION_TRIES` in all) while PostgreSQL rolls
    it back for colliding with another transaction; for an idempotent write that is whole in
    one transaction, which the caller would otherwise have to send again later."""
    for _ in range(COLLISION_TRIES - 1):
        try:
            return await attempt()
        except sa_exc.DBAPIError as exc:
            if not is_collision(exc):
                raise
    return await attempt()


def json_text(value: Any) -> str:
    """JSON of a JSON/JSONB value for PostgreSQL: orjson (submissions write whole manifests and
    the loop reads every compiled job), the standard library for what orjson refuses (integers
    beyond 64 bits)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value)


def async_url(url: str) -> str:
    """Return `url` with the asyncpg driver, whatever driver (if any) it names."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


# The scheduling loop's session setting. asyncpg prepares every statement, and after five
# executions PostgreSQL may keep one generic plan for it until the tables' statistics are
# analyzed again. A loop started on an empty database cached plans made for empty tables (a
# nested loop over all jobs for each placement): with 10,000 jobs held, its scan of the held
# rows took 1.3 s instead of 36 ms until autovacuum's ANALYZE came round. The loop's statements
# are few and large, so planning each one again costs it nothing it would notice.
CUSTOM_PLANS = {"plan_cache_mode": "force_custom_plan"}


class Database:
    """The hub's database: one engine, short transactions."""

    def __init__(self, url: str, *, pool_size: int = 10, custom_plans: bool = False) -> None:
        """`custom_plans`: plan every statement for the rows the tables hold when it runs,
        never reuse a prepared statement's generic plan (see `CUSTOM_PLANS`)."""
        self.url = async_url(url)
        connect_args: dict[str, Any] = {"timeout": 10}  # seconds to connect before a 503
        if custom_plans:
            connect_args["server_settings"] = CUSTOM_PLANS
        self.engine: AsyncEngine = create_async_engine(
            self.url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_recycle=300,
            hide_parameters=True,  # failed statements must not log job specs or env values
            connect_args=connect_args,
            json_serializer=json_text,
            json_deserializer=orjson.loads,
            # no pre-ping (a round trip per checkout): a connection that died with the server
            # fails its statement once, is invalidated, and the caller's retry gets a fresh one
        )
        # reads run in autocommit: no BEGIN/ROLLBACK round trips around a single SELECT
        self._reads = self.engine.execution_options(isolation_level="AUTOCOMMIT")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """Run a block in one transaction: committed on success, rolled back on error."""
        async with self.engine.begin() as conn:
            yield conn

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """An autocommit connection: each statement sees the latest committed data, and one
        that writes is its own transaction (no BEGIN/COMMIT round trips around it)."""
        async with self._reads.connect() as conn:
            yield conn

    async def close(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()
