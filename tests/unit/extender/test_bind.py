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


async def test_a_retried_bind_before_the_watch_shows_the_pod_bound_is_refused() -> None:
    """kube-scheduler retries a bind it timed out on; the first went through, and the watch
    has not shown it yet. Choosing again would free the devices the pod was bound with."""
    p, other = pod("p", flavor=B3, count=8), pod("q", flavor=B3, count=16)
    c = cache(ascend_910b("n", 16))
    c.set_pod(p)
    c.set_pod(other)
    api = FakeAPI()  # no watch: the cache never sees the Binding
    api.add(copy.deepcopy(p))
    api.add(copy.deepcopy(other))
    binder = Binder(c, api)
    assert (await binder.bind(args(p, "n"))).devices == tuple(range(8))
    again = await binder.bind(args(p, "n"))
    assert again.error == "pod default/p is already bound to n"
    assert c.occupancy("n", B3).devices.free_count() == 8  # still held by the first bind
    assert (await binder.bind(args(other, "n"))).conflict
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


def gang_pod(name: str, gang: str, size: int, count: int = 4) -> dict[str, Any]:
    p = pod(name, flavor=B3, count=count)
    p["metadata"]["annotations"] |= {wire.GANG: gang, wire.GANG_SIZE: str(size)}
    return p


async def test_the_binding_carries_what_the_vendor_plugin_reads() -> None:
    register = '[{"id":"GPU-a"},{"id":"GPU-b","index":1},{"id":"GPU-c","index":2}]'
    n = nvidia("g", n=30)  # HAMi: 3 GPUs x 10 shares
    n["metadata"]["annotations"]["hami.io/node-nvidia-register"] = register
    p = pod("p", flavor="nvidia/H100-80GB", count=1, milli=500, memory_mib=4096)
    c, api = setup(p, node=n)
    outcome = await Binder(c, api, clock=lambda: 1700000000.0).bind(args(p, "g"))
    notes = p["metadata"]["annotations"]
    assert outcome.devices == (0,)
    assert notes["hami.io/vgpu-devices-to-allocate"] == "GPU-a,NVIDIA,4096,50:;"
    assert notes["hami.io/vgpu-node"] == "g" and notes["hami.io/bind-phase"] == "allocating"
    assert notes["hami.io/bind-time"] == "1700000000"


async def test_the_hubs_hint_wins_when_its_devices_are_still_free() -> None:
    hinted = pod("p", flavor=B3, count=2)
    hinted["metadata"]["annotations"][wire.HINT_DEVICES] = "n:4,5"
    c, api = setup(hinted)
    assert (await Binder(c, api).bind(args(hinted, "n"))).devices == (4, 5)
    elsewhere = pod("q", flavor=B3, count=2)
    elsewhere["metadata"]["annotations"][wire.HINT_DEVICES] = "other:6,7"
    taken = pod("r", flavor=B3, count=2)
    taken["metadata"]["annotations"][wire.HINT_DEVICES] = "n:4,5"  # held by p now
    broken = pod("s", flavor=B3, count=4)
    broken["metadata"]["annotations"][wire.HINT_DEVICES] = "n:6,7,8,9"  # not one ring of 8
    for p in (elsewhere, taken, broken):
        api.add(p)
    binder = Binder(c, api)
    assert (await binder.bind(args(elsewhere, "n"))).devices == (0, 1)
    assert (await binder.bind(args(taken, "n"))).devices == (2, 3)
    assert (await binder.bind(args(broken, "n"))).devices == (8, 9, 10, 11)


async def test_a_gang_binds_only_once_every_member_reached_bind() -> None:
    members = [gang_pod(f"m{i}", "job-e1", 3) for i in range(3)]
    c, api = setup(*members)
    binder = Binder(c, api, gang_wait_s=5)
    first = [asyncio.create_task(binder.bind(args(m, "n"))) for m in members[:2]]
    for _ in range(10):
        await asyncio.sleep(0)
    assert api.calls == [] and c.reservations == 2  # reserved, waiting for the third
    last = await binder.bind(args(members[2], "n"))
    outcomes = [*(await asyncio.gather(*first)), last]
    assert all(o.error == "" for o in outcomes)
    assert sorted(d for o in outcomes for d in o.devices) == list(range(12))
    assert [call for call, _ in api.calls] == ["bind"] * 3


async def test_a_gang_that_does_not_gather_in_time_fails_every_member_and_releases() -> None:
    members = [gang_pod(f"m{i}", "job-e1", 3) for i in range(3)]
    c, api = setup(*members)
    binder = Binder(c, api, gang_wait_s=0.05)
    outcomes = await asyncio.gather(*(binder.bind(args(m, "n")) for m in members[:2]))
    assert all(o.gang_timeout and "not all 3 members reached bind" in o.error for o in outcomes)
    assert api.calls == [] and c.reservations == 0
    assert c.occupancy("n", B3).devices.free_count() == 16


async def test_a_retried_member_of_a_partly_bound_gang_binds_alone() -> None:
    bound = [gang_pod(f"m{i}", "job-e1", 3) for i in range(2)]
    for i, p in enumerate(bound):
        p["spec"]["nodeName"] = "n"
        p["metadata"]["annotations"][wire.DEVICES] = ",".join(map(str, range(4 * i, 4 * i + 4)))
    late = gang_pod("m2", "job-e1", 3)
    c, api = setup(*bound, late)
    outcome = await Binder(c, api, gang_wait_s=5).bind(args(late, "n"))
    assert outcome.devices == (8, 9, 10, 11)


async def test_a_replica_run_again_binds_beside_a_succeeded_peer_but_not_its_failed_self() -> None:
    """A gang member run again in place (its first attempt failed) binds at once while its
    peers ran (one still running, one succeeded); the failed attempt itself is no member."""
    peers = [gang_pod(f"m{i}", "job-e1", 3) for i in range(3)]
    for i, (p, phase) in enumerate(zip(peers, ("Running", "Succeeded", "Failed"), strict=True)):
        p["spec"]["nodeName"] = "n"
        p["metadata"]["annotations"][wire.DEVICES] = ",".join(map(str, range(4 * i, 4 * i + 4)))
        p["status"] = {"phase": phase}
    again = gang_pod("m2-a2", "job-e1", 3)
    c, api = setup(*peers, again)
    assert (await Binder(c, api, gang_wait_s=5).bind(args(again, "n"))).error == ""
    both = [gang_pod(f"r{i}-a2", "job-e2", 2) for i in range(2)]  # every member run again
    failed = [gang_pod(f"r{i}", "job-e2", 2) for i in range(2)]
    for p in failed:
        p["spec"]["nodeName"], p["status"] = "n", {"phase": "Failed"}
    c, api = setup(*failed, *both)
    alone = await Binder(c, api, gang_wait_s=0.05).bind(args(both[0], "n"))
    assert alone.gang_timeout  # waits for its peer's new pod, not for the failed ones


async def test_a_cancelled_gang_bind_releases_its_reservation() -> None:
    members = [gang_pod(f"m{i}", "job-e1", 2) for i in range(2)]
    c, api = setup(*members)
    binder = Binder(c, api, gang_wait_s=5)
    waiting = asyncio.create_task(binder.bind(args(members[0], "n")))
    await asyncio.sleep(0.01)
    assert c.reservations == 1
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert c.reservations == 0 and not binder._gangs and not binder._since
    binder.gang_wait_s = 0.01  # the cancelled member no longer counts: the other one waits alone
    assert (await binder.bind(args(members[1], "n"))).gang_timeout
