"""Small asyncio helpers shared by the hub's controllers and the agents."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def sleep_unless_stopped(stop: asyncio.Event, seconds: float) -> None:
    """Sleep `seconds`, returning early when `stop` is set."""
    try:
        async with asyncio.timeout(seconds):
            await stop.wait()
    except TimeoutError:
        pass


async def cancel_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel `tasks` and wait until every one has ended (their results and errors dropped:
    they are being stopped)."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
