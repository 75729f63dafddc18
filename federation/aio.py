"""Small asyncio helpers shared by the hub's controllers and the agents."""

from __future__ import annotations

import asyncio


async def sleep_unless_stopped(stop: asyncio.Event, seconds: float) -> None:
    """Sleep `seconds`, returning early when `stop` is set."""
    try:
        async with asyncio.timeout(seconds):
            await stop.wait()
    except TimeoutError:
        pass
