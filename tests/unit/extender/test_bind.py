"""Bind: exact devices, annotations before the Binding, reservations, concurrent binds."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_agents.extender import Binder, Cache
from cluster_agents.extender.wire import BindingArgs
from cluster_agents.kube.pods import parse_devices, pod_demand
from federation.scheduling import devices
from federation.wire import annotations as wire
from tests.unit.extender.builders import CATALOG, FakeAPI, ascend_910b, cache, nvidia, pod

B3 = "huawei/Ascend910B3"


def args(p: dict[str, Any], node: str) -> BindingArgs:
    meta = p["metadata"]
    return BindingArgs(meta["name"], meta["namespace"], meta["uid"], node)


def setup(*pods: dict[str, Any], node: dict[str, Any] | None = None) -> tuple[Cache, FakeAPI]:
    c = cache(node or ascend_910b("n", 16))
    api = FakeAPI(cache=c)
    for p in pods:
        api.add(p)
    return c, api


async def test_bind_carries_topology_aware_devices_in_the_binding() -> None:
    p = pod("p", flavor=B3, count=12)
    c, api = setup(p)
    outcome = await Binder(c, api).bind(args(p, "n"))
    assert outcome.error == "" and outcome.devices == (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13)
    assert [call for call, _ in api.calls] == ["bind"]
    notes = p["metadata"]["annotations"]
    assert notes[wire.DEVICES] == "0,1,2,3,4,5,8,9,10,11,12,13"
    assert notes[wire.BOUND_NODE] == "n" and p["spec"]["nodeName"] == "n"
    assert c.reservations == 0  # the watch showed the pod bound: it holds the devices itself
    assert c.occupancy("n", B3).devices.free_count() == 4


async def test_a_failed_binding_releases_the_reservation() -> None:
    p = pod("p", flavor=B3, count=4)
    c, api = setup(p)
    api.fail = {"bind"}
    outcome = await Binder(c, api).bind(args(p, "n"))
    assert "bind failed on purpose" in outcome.error and not outcome.conflict
    assert c.reservations == 0 and c.occupancy("n", B3).devices.free_count() == 16


async def test_a_node_that_filled_up_since_filter_is_a_conflict() -> None:
    p = pod("p", flavor=B3, count=8)
    full = pod("x", flavor=B3, count=16, node_name="n", devices=",".join(map(str, range(16))))
    c, api = setup(p, full)
    outcome = await Binder(c, api).bind(args(p, "n"))
    assert (
        outcome.conflict and "bind conflict on n: huawei/Ascend910B3: needs 8 free" in outcome.error
    )
    assert api.calls == []


async def test_a_second_bind_of_a_pod_in_flight_is_refused() -> None:
    p = pod("p", flavor=B3, count=2)
    c, api = setup(p)
    binder = Binder(c, api)
    first, second = await asyncio.gather(binder.bind(args(p, "n")), binder.bind(args(p, "n")))
    assert first.devices == (0, 1) and "already in flight" in second.error
    assert [call for call, _ in api.calls] == ["bind"]


async def test_pod_not_yet_in_the_cache_is_read_from_the_api() -> None:
    p = pod("p", flavor=B3, count=1)
    c = cache(ascend_910b("n"))
    api = FakeAPI()
    api.add(p)
    outcome = await Binder(c, api).bind(args(p, "n"))
    assert outcome.devices == (0,) and api.calls[0] == ("read", "p")
    wrong = BindingArgs("p", "default", "another-uid", "n")
    assert "has uid" in (await Binder(Cache(CATALOG), api).bind(wrong)).error


async def test_pod_without_our_devices_gets_a_plain_binding() -> None:
    p = pod("plain")
    c, api = setup(p)
    assert (await Binder(c, api).bind(args(p, "n"))).error == ""
    assert api.calls == [("bind", "plain")] and wire.DEVICES not in p["metadata"]["annotations"]


SHAPES = st.one_of(
    st.builds(lambda n: {"count": n}, st.sampled_from([1, 2, 3, 4, 8])),
    st.builds(lambda m: {"milli": m, "memory_mib": 10000}, st.integers(100, 900)),
)


class LaggingAPI(FakeAPI):
    """A watch that shows each change in order, some loop turns late, from a pod snapshot."""

    def __init__(self, c: Cache, lags: list[int]) -> None:
        super().__init__()
        self.watched = c
        self.lags = lags
        self.events: list[dict[str, Any]] = []
        self.shown = 0

    def _echo(self, namespace: str, name: str) -> None:
        self.events.append(copy.deepcopy(self.pods[(namespace, name)]))

    async def watch(self, done: asyncio.Event) -> None:
        while not done.is_set() or self.shown < len(self.events):
            for _ in range(self.lags[self.shown % len(self.lags)]):
                await asyncio.sleep(0)
            if self.shown < len(self.events):
                self.watched.set_pod(self.events[self.shown])
                self.shown += 1
            await asyncio.sleep(0)

    async def bind(self, namespace: str, name: str, uid: str, node: str, annotations: Any) -> None:
        await super().bind(namespace, name, uid, node, annotations)
        self._echo(namespace, name)


@settings(max_examples=60, deadline=None)
@given(
    shapes=st.lists(SHAPES, min_size=2, max_size=6),
    lags=st.lists(st.integers(0, 6), min_size=1, max_size=6),
    seed=st.integers(0, 2**16),
    flaky=st.booleans(),
)
def test_concurrent_binds_to_one_node_never_share_a_device(
    shapes: list[dict[str, Any]], lags: list[int], seed: int, flaky: bool
) -> None:
    h100 = "nvidia/H100-80GB"
    c = cache(nvidia("g"))
    api = LaggingAPI(c, lags)
    api.rng.seed(seed)
    pods = [pod(f"p{i}", flavor=h100, **shape) for i, shape in enumerate(shapes)]
    for p in pods:
        api.add(p)
        c.set_pod(p)
    api.fail = {"bind:p0"} if flaky else set()
    binder = Binder(c, api)

    async def run() -> None:
        done = asyncio.Event()
        watch = asyncio.create_task(api.watch(done))
        await asyncio.gather(*(binder.bind(args(p, "g")) for p in pods))
        done.set()
        await watch

    asyncio.run(run())
    node = c.occupancy("g", h100).devices
    empty = node.emptied()
    for p in pods:
        if p["spec"].get("nodeName") == "g":  # bound: its annotated devices must be free still
            demand = pod_demand(CATALOG, p)
            assert demand is not None
            held = parse_devices(p["metadata"]["annotations"][wire.DEVICES])
            empty = devices.allocate(empty, demand.request, held)
    assert empty == node  # the live cache agrees with the annotations, nothing else held
    assert c.reservations == 0
    assert not flaky or "nodeName" not in pods[0]["spec"]
