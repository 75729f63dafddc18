"""The reflector against a scripted API: paged lists, watch events, 410 Gone, restarts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from cluster_agents.kube import watch as k8s_watch
from cluster_agents.kube.metrics import BackendMetrics
from cluster_agents.kube.watch import Reflector, Store

NOW = 1796000600.0


@dataclass
class Response:
    """Enough of aiohttp.ClientResponse: a status and a JSON body or watch lines."""

    status: int = 200
    body: Any = None
    events: list[dict[str, Any]] = field(default_factory=list)
    hang: bool = False  # after the events, keep the stream open

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    async def read(self) -> bytes:
        return json.dumps(self.body).encode()

    @property
    def content(self) -> AsyncIterator[bytes]:
        async def lines() -> AsyncIterator[bytes]:
            for event in self.events:
                yield json.dumps(event).encode() + b"\n"
            if self.hang:
                await asyncio.Event().wait()

        return lines()


@dataclass
class API:
    """A list_call that answers lists and watches from scripts and records its calls."""

    lists: list[Response]
    watches: list[Response]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.__name__ = "list_pod_for_all_namespaces"  # names the API call in metrics

    def __call__(self, **kwargs: Any) -> Awaitable[Response]:
        self.calls.append(kwargs)
        script = self.watches if kwargs.get("watch") else self.lists

        async def answer() -> Response:
            return script.pop(0) if script else Response(hang=True)

        return answer()

    @property
    def watched_from(self) -> list[str]:
        return [c["resource_version"] for c in self.calls if c.get("watch")]


@dataclass
class Recorder:
    log: list[tuple[str, Any]] = field(default_factory=list)

    def store(self) -> Store:
        return Store(
            lambda items: self.log.append(("replace", [name(i) for i in items])),
            lambda obj: self.log.append(("upsert", name(obj))),
            lambda obj: self.log.append(("remove", name(obj))),
        )


def name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def obj(n: str, rv: int, written: str = "2026-11-30T01:03:18Z") -> dict[str, Any]:
    return {
        "metadata": {
            "name": n,
            "resourceVersion": str(rv),
            "managedFields": [{"time": "2026-11-30T01:00:00Z"}, {"time": written}],
        }
    }


def page(items: list[dict[str, Any]], rv: int, more: str = "") -> Response:
    meta: dict[str, Any] = {"resourceVersion": str(rv), **({"continue": more} if more else {})}
    return Response(body={"items": items, "metadata": meta})


def reflector(api: API, recorder: Recorder, metrics: BackendMetrics) -> Reflector:
    return Reflector("pods", api, recorder.store(), metrics, lambda: NOW)


async def until(check: Callable[[], bool]) -> None:
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition not reached")


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def sample(metrics: BackendMetrics, metric: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(metric, labels) or 0.0


async def test_paged_list_then_events_then_resync_after_410() -> None:
    api = API(
        lists=[
            page([obj("a", 3)], 10, more="token"),
            page([obj("b", 4)], 10),
            page([obj("a", 16)], 30),
        ],
        watches=[
            Response(
                events=[
                    {"type": "ADDED", "object": obj("c", 11)},
                    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
                    {"type": "MODIFIED", "object": obj("a", 16)},
                    {"type": "DELETED", "object": obj("b", 17)},
                    {"type": "ERROR", "object": {"kind": "Status", "code": 410}},
                ]
            )
        ],
    )
    recorder, metrics = Recorder(), BackendMetrics()
    r = reflector(api, recorder, metrics)
    await r.sync()
    assert [c.get("_continue") for c in api.calls] == [None, "token"]
    assert (recorder.log, r.version) == ([("replace", ["a", "b"])], "10")

    task = asyncio.create_task(r.run())
    await until(lambda: r.resyncs == 1 and len(api.watched_from) == 2)
    await stop(task)
    assert recorder.log[1:] == [
        ("upsert", "c"),
        ("upsert", "a"),
        ("remove", "b"),
        ("replace", ["a"]),
    ]
    assert api.watched_from == ["10", "30"]
    assert api.calls[2]["allow_watch_bookmarks"] is True
    assert sample(metrics, "suanpan_agent_kube_resyncs_total", resource="pods") == 1
    # lag = now - the newest managedFields time (01:03:18 is 2 s before NOW)
    assert sample(metrics, "suanpan_agent_kube_watch_lag_seconds_count", resource="pods") == 3
    assert sample(metrics, "suanpan_agent_kube_watch_lag_seconds_sum", resource="pods") == 6.0


async def test_http_410_on_the_watch_also_lists_again() -> None:
    api = API(lists=[page([], 5), page([obj("x", 9)], 9)], watches=[Response(status=410)])
    recorder = Recorder()
    r = reflector(api, recorder, BackendMetrics())
    await r.sync()
    task = asyncio.create_task(r.run())
    await until(lambda: r.resyncs == 1)
    await stop(task)
    assert recorder.log == [("replace", []), ("replace", ["x"])]


async def test_errors_back_off_and_resume_from_the_last_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(k8s_watch, "BACKOFF_S", 0.0)
    api = API(
        lists=[page([], 5)],
        watches=[
            Response(events=[{"type": "ADDED", "object": obj("a", 6)}]),  # server ends stream
            Response(status=500, body={"message": "etcd is sad"}),
            Response(events=[{"type": "ERROR", "object": {"code": 500, "message": "boom"}}]),
        ],
    )
    r = reflector(api, Recorder(), BackendMetrics())
    await r.sync()
    task = asyncio.create_task(r.run())
    await until(lambda: len(api.watched_from) == 4)
    await stop(task)
    assert api.watched_from == ["5", "6", "6", "6"]
    assert r.resyncs == 0


async def test_restart_resumes_from_the_given_version() -> None:
    api = API(lists=[page([], 40)], watches=[Response(hang=True)])
    r = reflector(api, Recorder(), BackendMetrics())
    await r.sync()
    task = asyncio.create_task(r.run())
    await until(lambda: len(api.watched_from) == 1)
    r.restart("1")
    await until(lambda: len(api.watched_from) == 2)
    r.restart()
    await until(lambda: len(api.watched_from) == 3)
    await stop(task)  # a cancelled run() stops for good
    assert api.watched_from == ["40", "1", "1"]


async def test_an_object_the_store_rejects_is_skipped() -> None:
    api = API(
        lists=[page([], 5)],
        watches=[
            Response(
                events=[
                    {"type": "ADDED", "object": obj("bad", 6)},
                    {"type": "ADDED", "object": obj("good", 7)},
                ],
                hang=True,
            )
        ],
    )
    seen: list[str] = []

    def upsert(o: dict[str, Any]) -> None:
        if name(o) == "bad":
            raise KeyError("spec")
        seen.append(name(o))

    r = Reflector(
        "pods", api, Store(lambda _: None, upsert, lambda _: None), BackendMetrics(), lambda: NOW
    )
    await r.sync()
    task = asyncio.create_task(r.run())
    await until(lambda: r.version == "7")
    await stop(task)
    assert (seen, api.watched_from) == (["good"], ["5"])
