"""When the hub client sends a call again: a scripted HTTP server answers each request as the
test says, and records what it received."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

import api.client as client_module
from api.client import HubClient, HubError
from federation.wire.http import IDEMPOTENCY_HEADER

# an answer: status, extra headers
Answer = tuple[int, dict[str, str]]


class Scripted:
    """Answers requests with `answers` in turn (the last one for ever); keeps the requests."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, str | None]] = []  # method, Idempotency-Key

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.headers.get(IDEMPOTENCY_HEADER)))
        status, headers = self.answers[min(len(self.seen), len(self.answers)) - 1]
        body = {"id": "job-1"} if status < 400 else {"title": "refused", "detail": "for now"}
        return web.json_response(body, status=status, headers=headers)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[list[Answer]], Any]]:
    servers: list[TestServer] = []

    async def start(answers: list[Answer]) -> tuple[Scripted, str]:
        script = Scripted(answers)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", script.handle)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return script, str(server.make_url("")).rstrip("/")

    yield start
    for server in servers:
        await server.close()


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "BACKOFF_S", 0.01)


UNAVAILABLE = (503, {"Retry-After": "0"})


async def test_a_submission_refused_for_now_is_sent_again_under_the_same_key(
    serve: Any,
) -> None:
    script, url = await serve([UNAVAILABLE, (429, {}), (201, {})])
    async with HubClient(url, "t") as client:
        assert (await client.submit({"kind": "Job"}))["id"] == "job-1"
    keys = {key for _, key in script.seen}
    assert len(script.seen) == 3 and len(keys) == 1 and None not in keys


async def test_a_callers_key_is_the_one_sent(serve: Any) -> None:
    script, url = await serve([UNAVAILABLE, (201, {})])
    async with HubClient(url, "t") as client:
        await client.submit("kind: Job\n", idempotency_key="mine")
    assert script.seen == [("POST", "mine"), ("POST", "mine")]


async def test_a_post_without_a_key_is_sent_once(serve: Any) -> None:
    script, url = await serve([UNAVAILABLE, (201, {})])
    async with HubClient(url, "t") as client:
        with pytest.raises(HubError) as refused:
            await client.request("POST", "/v1/tenants", json={"name": "x"})
    assert refused.value.status == 503 and script.seen == [("POST", None)]


async def test_reads_give_up_after_the_last_attempt(serve: Any) -> None:
    script, url = await serve([UNAVAILABLE])
    async with HubClient(url, "t") as client:
        with pytest.raises(HubError):
            await client.request("GET", "/v1/jobs")
    assert len(script.seen) == client_module.ATTEMPTS


@pytest.mark.parametrize("answer", [(400, {}), (404, {}), (500, {}), (429, {"Retry-After": "120"})])
async def test_an_error_or_a_long_wait_is_raised_at_once(serve: Any, answer: Answer) -> None:
    script, url = await serve([answer, (200, {})])
    async with HubClient(url, "t") as client:
        with pytest.raises(HubError) as failed:
            await client.request("GET", "/v1/jobs")
    assert failed.value.status == answer[0] and len(script.seen) == 1
