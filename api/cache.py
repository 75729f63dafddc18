"""A short-lived cache of database look-ups that the hot path repeats (tokens, submission
targets): each value is kept for a TTL, and concurrent misses of one key share one look-up,
so a key whose entry has just lapsed costs one query, not one per waiting request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
MAX_ENTRIES = 10_000  # a cache this full is emptied


class Recent(Generic[K, V]):
    """Values seen within `ttl_s`; `clear` forgets them, and a look-up that began before a
    `clear` is not remembered (it may have read what the clear was for)."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[K, tuple[V, float]] = {}  # key -> (value, read at)
        self._loading: dict[K, asyncio.Task[V]] = {}
        self._generation = 0

    def recent(self, key: K, max_age_s: float | None = None) -> V | None:
        """The value of `key` if read within `max_age_s` (default the TTL)."""
        entry = self._entries.get(key)
        limit = self.ttl_s if max_age_s is None else max_age_s
        if entry is None or time.monotonic() - entry[1] > limit:
            return None
        return entry[0]

    async def get(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """The recent value of `key`, else what `load` returns (remembered); a waiter that is
        cancelled leaves the look-up running for the others."""
        value = self.recent(key)
        if value is not None:
            return value
        task = self._loading.get(key)
        if task is None:
            task = asyncio.ensure_future(self._load(key, load, self._generation))
            self._loading[key] = task
        return await asyncio.shield(task)

    async def _load(self, key: K, load: Callable[[], Awaitable[V]], generation: int) -> V:
        try:
            value = await load()
        finally:
            if self._generation == generation:
                del self._loading[key]
        if self._generation == generation:
            self.put(key, value)
        return value

    def put(self, key: K, value: V) -> None:
        """Remember `value` for `key` from now."""
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (value, time.monotonic())

    def clear(self) -> None:
        """Forget every value, and what look-ups under way will return."""
        self._entries.clear()
        self._loading.clear()
        self._generation += 1
