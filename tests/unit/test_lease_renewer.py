"""When the agent renews its lease next: a scripted HTTP server answers the renewals as the test
says. A renewal the hub refused with `Retry-After` (its database rolled the renewal back) is
sent again when the hub said, not a whole period later: two periods without a renewal turn the
cluster NotReady."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from cluster_agents.agent.hub_client import HubApi
from cluster_agents.agent.lease import LeaseRenewer

Answer = tuple[int, dict[str, str], dict[str, float] | None]  # status, headers, JSON body
REPLY = {"leaseS": 40.0, "renewS": 10.0}


@dataclass
class Scripted:
    """A renewer (renewing every 5 s until the hub says otherwise), the answers its hub gives
    in turn (the last one for ever), and when each renewal arrived (monotonic)."""

    renew: LeaseRenewer
    answers: list[Answer]
    seen: list[float]


@pytest.fixture
async def renewer() -> AsyncIterator[Scripted]:
    answers: list[Answer] = []
    seen: list[float] = []

    async def lease(request: web.Request) -> web.Response:
        seen.append(time.monotonic())
        status, headers, body = answers.pop(0) if len(answers) > 1 else answers[0]
        return web.json_response(body or {"title": "refused"}, status=status, headers=headers)

    app = web.Application()
    app.router.add_post("/v1/agent/lease", lease)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    hub = HubApi(str(server.make_url("")), "token")
    renew = LeaseRenewer(hub, lambda: None, lambda: None)
    renew.lease_s, renew.renew_s = 20.0, 5.0
    yield Scripted(renew, answers, seen)
    await hub.close()
    await server.close()


async def test_an_accepted_renewal_waits_the_period_the_hub_gives(
    renewer: Scripted,
) -> None:
    renew, answers = renewer.renew, renewer.answers
    answers.append((200, {}, REPLY))
    assert await renew.renew() == 10.0
    assert (renew.lease_s, renew.renew_s) == (40.0, 10.0) and not renew.lost


@pytest.mark.parametrize(("retry_after", "wait_s"), [("1", 1.0), ("0", 0.0), ("60", 5.0)])
async def test_a_refused_renewal_is_sent_again_when_the_hub_says(
    renewer: Scripted, retry_after: str, wait_s: float
) -> None:
    renew, answers = renewer.renew, renewer.answers
    answers.append((503, {"Retry-After": retry_after}, None))
    assert await renew.renew() == wait_s  # at most the period it renews at


async def test_without_a_time_given_the_next_renewal_waits_the_period(
    renewer: Scripted,
) -> None:
    renew, answers = renewer.renew, renewer.answers
    answers.append((500, {}, None))
    assert await renew.renew() == 5.0
    answers.append((404, {}, None))  # not registered (yet)
    assert await renew.renew() == 5.0


async def test_the_renewing_thread_sends_a_refused_renewal_again_when_the_hub_says(
    renewer: Scripted,
) -> None:
    renew, answers = renewer.renew, renewer.answers
    answers += [(503, {"Retry-After": "0"}, None), (200, {}, REPLY)]
    renew.start()
    try:
        for _ in range(60):  # 3 s: well before the 5 s period
            if len(renewer.seen) >= 2:
                break
            await asyncio.sleep(0.05)
    finally:
        await renew.stop()
    seen = renewer.seen
    assert len(seen) >= 2 and seen[1] - seen[0] < 3.0
