"""`connect`: the proxy environment is read once; requests never hop to a thread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from kubernetes_asyncio.client import CoreV1Api

from cluster_agents.kube.client import connect

APISERVER = "http://apiserver.invalid:6443"  # never resolved: every request goes by the proxy


class NoThreads(ThreadPoolExecutor):
    """A default executor that fails every job: any per-request thread hop breaks the call."""

    def submit(self, *_: Any, **__: Any) -> Future[Any]:
        raise AssertionError("an API request ran something in a worker thread")


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[str, list[str]]]:
    """An HTTP proxy that answers every request for the node list itself; yields its URL and
    the request targets it saw."""
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(str(request.url))
        return web.json_response({"kind": "NodeList", "items": [], "metadata": {}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", seen
    await runner.cleanup()


def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": APISERVER}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return str(path)


async def test_the_proxy_environment_is_honoured_without_per_request_lookups(
    tmp_path: Path, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with await connect(kubeconfig(tmp_path)) as api:
        asyncio.get_running_loop().set_default_executor(NoThreads())
        for _ in range(3):
            assert (await CoreV1Api(api).list_node()).items == []
    assert seen == [f"{APISERVER}/api/v1/nodes"] * 3


async def test_no_proxy_excludes_the_apiserver(
    tmp_path: Path, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = proxy
    monkeypatch.setenv("HTTP_PROXY", url)
    monkeypatch.setenv("NO_PROXY", "apiserver.invalid")
    async with await connect(kubeconfig(tmp_path)) as api:
        assert api.configuration.proxy is None
