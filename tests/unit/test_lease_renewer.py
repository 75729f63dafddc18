"""When the agent renews its lease next: a scripted HTTP server answers the renewals as the test
says. A renewal the hub refused with `Retry-After` (its database rolled the renewal back) is
sent again when the hub said, not a whole period later: two periods without a renewal turn the
cluster NotReady."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from cluster_agents.agent.hub_client import HubApi
from cluster_agents.agent.lease import LeaseRenewer

Answer = tuple[int, dict[str, str], dict[str, float] | None]  # status, headers, JSON body
REPLY = {"leaseS": 40.0, "renewS": 10.0}


@pytest.fixture
async def renewer() -> AsyncIterator[tuple[LeaseRenewer, list[Answer]]]:
    answers: list[Answer] = []

    async def lease(request: web.Request) -> web.Response:
        status, headers, body = answers.pop(0)
        return web.json_response(body or {"title": "refused"}, status=status, headers=headers)

    app = web.Application()
    app.router.add_post("/v1/agent/lease", lease)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    hub = HubApi(str(server.make_url("")), "token")
    renew = LeaseRenewer(hub, lambda: None, lambda: None)
    renew.lease_s, renew.renew_s = 20.0, 5.0
    yield renew, answers
    await hub.close()
    await server.close()


async def test_an_accepted_renewal_waits_the_period_the_hub_gives(
    renewer: tuple[LeaseRenewer, list[Answer]],
) -> None:
    renew, answers = renewer
    answers.append((200, {}, REPLY))
    assert await renew.renew() == 10.0
    assert (renew.lease_s, renew.renew_s) == (40.0, 10.0) and not renew.lost


@pytest.mark.parametrize(("retry_after", "wait_s"), [("1", 1.0), ("0", 0.0), ("60", 5.0)])
async def test_a_refused_renewal_is_sent_again_when_the_hub_says(
    renewer: tuple[LeaseRenewer, list[Answer]], retry_after: str, wait_s: float
) -> None:
    renew, answers = renewer
    answers.append((503, {"Retry-After": retry_after}, None))
    assert await renew.renew() == wait_s  # at most the period it renews at


async def test_without_a_time_given_the_next_renewal_waits_the_period(
    renewer: tuple[LeaseRenewer, list[Answer]],
) -> None:
    renew, answers = renewer
    answers.append((500, {}, None))
    assert await renew.renew() == 5.0
    answers.append((404, {}, None))  # not registered (yet)
    assert await renew.renew() == 5.0
