"""The vectorized fit of `Pool` is `devices.fit`, node by node ("device fit is one function")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from federation.catalog.types import SharingRule, TopologyRule
from federation.nodeplacement import PodRequest, Pool, PoolNode
from federation.scheduling import devices
from federation.scheduling.devices import WHOLE, DeviceRequest, NodeDevices

MODELS = ("A", "B")


@st.composite
def topologies(draw: st.DrawFn, size: int) -> TopologyRule:
    group = draw(st.sampled_from([0, 1, 2, 4, 8]))
    allowed = draw(st.frozensets(st.integers(1, 8), max_size=4))
    spill = draw(st.sampled_from(["any", "whole_groups", "even_split"]))
    return TopologyRule(group_size=group, allowed_counts=allowed, spill=spill)


@st.composite
def node_devices(draw: st.DrawFn) -> NodeDevices:
    size = draw(st.integers(1, 8))
    memory = tuple(
        draw(st.lists(st.sampled_from([8000, 16_000, 16_384]), min_size=size, max_size=size))
    )
    used, used_mem, shares = [], [], []
    for d in range(size):
        kind = draw(st.sampled_from(["free", "whole", "shared"]))
        if kind == "free":
            used.append(0), used_mem.append(0), shares.append(0)
        elif kind == "whole":
            used.append(WHOLE), used_mem.append(memory[d]), shares.append(0)
        else:
            milli = draw(st.integers(1, WHOLE))
            used.append(milli)
            used_mem.append(draw(st.integers(0, memory[d])))
            shares.append(draw(st.integers(1, 4)))
    sharing = SharingRule(
        enabled=draw(st.booleans()),
        memory_unit_mib=draw(st.sampled_from([1, 256, 1024])),
        max_shares=draw(st.sampled_from([0, 1, 2, 4])),
    )
    return NodeDevices(
        model=draw(st.sampled_from(MODELS)),
        memory_mib=memory,
        used_milli=tuple(used),
        used_memory_mib=tuple(used_mem),
        healthy=tuple(draw(st.lists(st.booleans(), min_size=size, max_size=size))),
        topology=draw(topologies(size)),
        sharing=sharing,
        shares=tuple(shares),
    )


@st.composite
def requests(draw: st.DrawFn) -> PodRequest:
    if draw(st.booleans()):
        dreq = DeviceRequest(
            count=1,
            milli=draw(st.integers(1, WHOLE - 1)),
            memory_mib=draw(st.sampled_from([0, 2000, 9000])),
        )
    else:
        dreq = DeviceRequest(
            count=draw(st.integers(1, 8)), memory_mib=draw(st.sampled_from([0, 10_000]))
        )
    models = draw(st.frozensets(st.sampled_from(MODELS), max_size=1))
    return PodRequest(draw(st.integers(0, 8000)), draw(st.integers(0, 8000)), dreq, models)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(node_devices(), min_size=1, max_size=6), st.lists(requests(), min_size=1, max_size=4)
)
def test_vectorized_fit_is_device_fit(nds: list[NodeDevices], reqs: list[PodRequest]) -> None:
    nodes = [PoolNode(f"n{i}", 4000, 4000, nd) for i, nd in enumerate(nds)]
    pool = Pool(nodes)
    for req in reqs:
        got = pool.feasible(req)
        for i, nd in enumerate(nds):
            assert req.device is not None
            want = (
                req.cpu_milli <= 4000
                and req.memory_mib <= 4000
                and (not req.models or nd.model in req.models)
                and devices.fit(nd, req.device).ok
            )
            assert bool(got[i]) == want, (nd, req)


@settings(max_examples=60, deadline=None)
@given(node_devices(), requests())
def test_place_then_remove_restores_the_node(nd: NodeDevices, req: PodRequest) -> None:
    pool = Pool([PoolNode("n", 10_000, 10_000, nd)])
    assert req.device is not None
    if not pool.feasible(req)[0]:
        return
    chosen = pool.choose_devices(0, req)
    pool.place(0, req, chosen)
    assert pool.node_devices(0) == devices.allocate(nd, req.device, chosen)
    pool.remove(0, req, chosen)
    assert pool.node_devices(0) == nd
    assert pool.cpu_free[0] == 10_000 and pool.version[0] == 2


def test_cpu_only_request_fits_any_node_with_room() -> None:
    pool = Pool([PoolNode("cpu", 2000, 2000), PoolNode("small", 500, 2000)])
    assert pool.feasible(PodRequest(1000, 1000)).tolist() == [True, False]
    assert not pool.feasible(PodRequest(1000, 1000, DeviceRequest())).any()
