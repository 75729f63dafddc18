"""The hot path's look-up cache: one look-up for concurrent misses, none remembered across a
clear, errors never cached."""

from __future__ import annotations

import asyncio

import pytest

from api.cache import Recent


async def test_concurrent_misses_share_one_lookup_and_the_value_is_kept() -> None:
    cache: Recent[str, int] = Recent(60.0)
    calls = 0

    async def load() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return 7

    assert await asyncio.gather(*(cache.get("k", load) for _ in range(50))) == [7] * 50
    assert await cache.get("k", load) == 7
    assert calls == 1


async def test_a_lookup_under_way_at_a_clear_is_not_remembered() -> None:
    cache: Recent[str, str] = Recent(60.0)
    release = asyncio.Event()

    async def stale() -> str:
        await release.wait()
        return "before the change"

    async def fresh() -> str:
        return "after the change"

    waiting = asyncio.create_task(cache.get("k", stale))
    await asyncio.sleep(0)
    cache.clear()  # e.g. a token revoked while its old verdict was being read
    release.set()
    assert await waiting == "before the change"  # that request began before the clear
    assert await cache.get("k", fresh) == "after the change"


async def test_errors_reach_every_waiter_and_are_not_cached() -> None:
    cache: Recent[str, int] = Recent(60.0)

    async def fail() -> int:
        await asyncio.sleep(0.01)
        raise LookupError("no such key")

    waiters = (cache.get("k", fail) for _ in range(3))
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, LookupError) for r in results)

    async def found() -> int:
        return 1

    assert await cache.get("k", found) == 1


async def test_values_lapse_after_the_ttl() -> None:
    cache: Recent[str, int] = Recent(0.05)
    cache.put("k", 1)
    assert cache.recent("k") == 1
    await asyncio.sleep(0.06)
    assert cache.recent("k") is None
    assert cache.recent("k", max_age_s=10.0) == 1  # older values on request (an outage)


async def test_a_cancelled_waiter_leaves_the_lookup_to_the_others() -> None:
    cache: Recent[str, int] = Recent(60.0)

    async def load() -> int:
        await asyncio.sleep(0.02)
        return 3

    first = asyncio.create_task(cache.get("k", load))
    second = asyncio.create_task(cache.get("k", load))
    await asyncio.sleep(0.005)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await second == 3
