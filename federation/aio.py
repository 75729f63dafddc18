"""Small asyncio helpers shared by the hub's controllers and the agents."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


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


class LoopThread:
    """An event loop in a daemon thread of its own, for work that must not share fate with a
    busy event loop (a leader's lock pings): coroutines handed to `call` run there, and the
    interpreter switches threads every few milliseconds however long the caller's loop is
    blocked. Everything a coroutine opens there (a connection) belongs to that loop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _ensure(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the thread's loop and wait for it; cancelling the wait cancels it."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._ensure()))

    async def stop(self) -> None:
        """Stop the loop and its thread once its tasks have ended (a later `call` starts new
        ones)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        await self.call(_drain())
        self._loop = self._thread = None
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
        loop.close()


async def _drain() -> None:
    """Wait for every other task of the running loop to end."""
    others = asyncio.all_tasks() - {asyncio.current_task()}
    await asyncio.gather(*others, return_exceptions=True)
