"""Device fit: per-vendor topology tables, shares, and invariants over random usage."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.scheduling.devices import (
    DeviceConflict,
    DeviceRequest,
    FitCode,
    NodeDevices,
    allocate,
    fit,
    max_feasible_count,
    release,
)

from .rules import GIB, HAMI_SHARING, RULES, VNPU_SHARING, node_devices

OK, INSUFFICIENT, UNRESOLVABLE = FitCode.OK, FitCode.INSUFFICIENT, FitCode.UNRESOLVABLE

# (case, model, devices taken, count, expected code, expected devices when OK)
WHOLE_DEVICE_TABLE = [
    ("910 one card on an empty node", "huawei/Ascend910", set(), 1, OK, (0,)),
    ("910 one card fills the broken ring", "huawei/Ascend910", {0}, 1, OK, (1,)),
    ("910 four cards need an intact ring", "huawei/Ascend910", {0}, 4, OK, (4, 5, 6, 7)),
    ("910 four cards with both rings broken", "huawei/Ascend910", {0, 4}, 4, INSUFFICIENT, ()),
    ("910 two cards best-fit ring", "huawei/Ascend910", {0, 1, 4}, 2, OK, (2, 3)),
    ("910 three cards never allowed", "huawei/Ascend910", set(), 3, UNRESOLVABLE, ()),
    ("910 eight cards take the node", "huawei/Ascend910", set(), 8, OK, tuple(range(8))),
    ("910 eight cards on a busy node", "huawei/Ascend910", {3}, 8, INSUFFICIENT, ()),
    ("910B x8 any count", "huawei/Ascend910B3", {0, 5}, 5, OK, (1, 2, 3, 4, 6)),
    ("910B x16 eight in one ring", "huawei/Ascend910B3x16", {0}, 8, OK, tuple(range(8, 16))),
    ("910B x16 nine never allowed", "huawei/Ascend910B3x16", set(), 9, UNRESOLVABLE, ()),
    (
        "910B x16 ten split five and five",
        "huawei/Ascend910B3x16",
        set(),
        10,
        OK,
        (0, 1, 2, 3, 4, 8, 9, 10, 11, 12),
    ),
    (
        "910B x16 ten when one ring has four free",
        "huawei/Ascend910B3x16",
        {0, 1, 2, 3},
        10,
        INSUFFICIENT,
        (),
    ),
    (
        "910B x16 twelve split six and six",
        "huawei/Ascend910B3x16",
        {0, 1},
        12,
        OK,
        (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13),
    ),
    ("910B x16 sixteen whole node", "huawei/Ascend910B3x16", set(), 16, OK, tuple(range(16))),
    ("910C one die fills a broken module", "huawei/Ascend910C", {0}, 1, OK, (1,)),
    ("910C two dies take a whole module", "huawei/Ascend910C", {0}, 2, OK, (2, 3)),
    ("910C four dies take two modules", "huawei/Ascend910C", {0, 3}, 4, OK, (4, 5, 6, 7)),
    ("910C three dies never allowed", "huawei/Ascend910C", set(), 3, UNRESOLVABLE, ()),
    ("910C eighteen dies exceed the node", "huawei/Ascend910C", set(), 18, UNRESOLVABLE, ()),
    ("P800 four in the intact wing", "kunlunxin/P800", {0}, 4, OK, (4, 5, 6, 7)),
    ("P800 two best-fit wing", "kunlunxin/P800", {0, 4, 5}, 2, OK, (6, 7)),
    ("P800 four never crosses wings", "kunlunxin/P800", {0, 4}, 4, INSUFFICIENT, ()),
    ("P800 three never allowed", "kunlunxin/P800", set(), 3, UNRESOLVABLE, ()),
    ("P800 eight whole node", "kunlunxin/P800", set(), 8, OK, tuple(range(8))),
    ("NVIDIA any three lowest free", "nvidia/H100-80GB", {0, 5}, 3, OK, (1, 2, 3)),
    ("NVIDIA nine on an eight-GPU node", "nvidia/H100-80GB", set(), 9, UNRESOLVABLE, ()),
    ("NVIDIA seven with two taken", "nvidia/H100-80GB", {0, 5}, 7, INSUFFICIENT, ()),
]


@pytest.mark.parametrize(
    ("model", "taken", "count", "code", "devices"),
    [case[1:] for case in WHOLE_DEVICE_TABLE],
    ids=[case[0] for case in WHOLE_DEVICE_TABLE],
)
def test_whole_device_fit_follows_vendor_topology(
    model: str, taken: set[int], count: int, code: FitCode, devices: tuple[int, ...]
) -> None:
    result = fit(node_devices(model, taken=taken), DeviceRequest(count=count))
    assert (result.code, result.devices) == (code, devices), result.reason


def test_spread_takes_the_freest_group() -> None:
    node = node_devices("huawei/Ascend910", taken={0})
    assert fit(node, DeviceRequest(count=1), prefer="spread").devices == (4,)


def test_spill_any_prefers_one_group_and_keeps_intact_groups_when_spilling() -> None:
    rule = replace(RULES["huawei/Ascend910"][0], allowed_counts=frozenset(), spill="any")
    node = replace(node_devices("huawei/Ascend910", taken={0, 1, 4}), topology=rule)
    assert fit(node, DeviceRequest(count=3)).devices == (5, 6, 7)
    node = replace(node_devices("huawei/Ascend910", taken={0, 1, 4, 5}), topology=rule)
    # Neither ring holds three: spill over broken rings, never needing an intact one.
    assert fit(node, DeviceRequest(count=3)).devices == (2, 3, 6)


def test_unhealthy_and_small_devices_are_skipped() -> None:
    node = node_devices("nvidia/H100-80GB", unhealthy={0, 1})
    assert fit(node, DeviceRequest(count=2)).devices == (2, 3)
    assert fit(node, DeviceRequest(count=7)).code is INSUFFICIENT
    too_big = fit(node, DeviceRequest(count=1, memory_mib=96 * GIB))
    assert too_big.code is UNRESOLVABLE
    assert "81920 MiB" in too_big.reason


def test_insufficient_reason_names_the_largest_feasible_count() -> None:
    node = node_devices("huawei/Ascend910B3x16", taken={0, 1, 2, 3, 8, 9, 10, 11})
    result = fit(node, DeviceRequest(count=8))
    assert result.code is INSUFFICIENT
    assert "largest feasible 4" in result.reason
    assert max_feasible_count(node, DeviceRequest(count=8)) == 4


def shared(model: str, used: tuple[int, ...], *, sharing: object = HAMI_SHARING) -> NodeDevices:
    node = node_devices(model, size=len(used), sharing=HAMI_SHARING)
    if sharing is not HAMI_SHARING:
        node = replace(node, sharing=sharing)  # type: ignore[arg-type]
    memory = tuple(u * m // 1000 for u, m in zip(used, node.memory_mib, strict=True))
    return replace(node, used_milli=used, used_memory_mib=memory, shares=(1,) * len(used))


SHARE_TABLE = [
    ("pack onto the fullest device that fits", (300, 600, 0), 300, "pack", OK, (1,)),
    ("spread onto the least used device", (300, 600, 0), 300, "spread", OK, (2,)),
    ("pack skips a device that would overflow", (300, 800, 0), 300, "pack", OK, (0,)),
    ("no device has room", (800, 900), 300, "pack", INSUFFICIENT, ()),
]


@pytest.mark.parametrize(
    ("used", "milli", "prefer", "code", "devices"),
    [case[1:] for case in SHARE_TABLE],
    ids=[case[0] for case in SHARE_TABLE],
)
def test_share_fit(
    used: tuple[int, ...], milli: int, prefer: str, code: FitCode, devices: tuple[int, ...]
) -> None:
    node = shared("nvidia/H100-80GB", used)
    result = fit(node, DeviceRequest(milli=milli), prefer=prefer)  # type: ignore[arg-type]
    assert (result.code, result.devices) == (code, devices), result.reason


def test_share_needs_sharing_enabled() -> None:
    node = node_devices("huawei/Ascend910B3")
    assert fit(node, DeviceRequest(milli=250)).code is UNRESOLVABLE


def test_share_cap_and_memory_rounding() -> None:
    node = replace(node_devices("huawei/Ascend910B3", size=1), sharing=VNPU_SHARING)
    request = DeviceRequest(milli=250, memory_mib=10 * GIB)
    node = allocate(node, request, (0,))
    assert node.used_memory_mib == (16 * GIB,)  # rounded up to 8 GiB units
    capped = replace(node, sharing=replace(HAMI_SHARING, max_shares=1))
    assert fit(capped, DeviceRequest(milli=100, memory_mib=GIB)).code is INSUFFICIENT


def test_allocate_refuses_taken_devices_and_release_refuses_free_ones() -> None:
    node = node_devices("nvidia/H100-80GB", taken={1})
    with pytest.raises(DeviceConflict):
        allocate(node, DeviceRequest(count=2), (0, 1))
    with pytest.raises(DeviceConflict):
        release(node, DeviceRequest(count=1), (0,))
    with pytest.raises(DeviceConflict):
        allocate(node, DeviceRequest(count=2), (0,))


def test_request_validation() -> None:
    with pytest.raises(ValueError, match="one device"):
        DeviceRequest(count=2, milli=500)
    with pytest.raises(ValueError, match="milli"):
        DeviceRequest(milli=0)


# --- invariants --------------------------------------------------------------------------------

requests = st.one_of(
    st.builds(DeviceRequest, count=st.integers(1, 17), memory_mib=st.sampled_from([0, 40 * GIB])),
    st.builds(
        DeviceRequest,
        milli=st.integers(1, 999),
        memory_mib=st.sampled_from([0, 1, 8 * GIB, 30 * GIB, 200 * GIB]),
    ),
)


@st.composite
def busy_nodes(draw: st.DrawFn) -> NodeDevices:
    """A node of a random vendor rule, filled by a random sequence of fitting requests."""
    model = draw(st.sampled_from(sorted(RULES)))
    sharing = draw(st.sampled_from([HAMI_SHARING, VNPU_SHARING]))
    node = node_devices(model, sharing=sharing, unhealthy=draw(st.sets(st.integers(0, 15))))
    for req in draw(st.lists(requests, max_size=8)):
        chosen = fit(node, req, prefer=draw(st.sampled_from(["pack", "spread"])))
        if chosen.ok:
            node = allocate(node, req, chosen.devices)
    return node


@settings(max_examples=150, deadline=None)
@given(node=busy_nodes(), req=requests)
def test_fit_invariants(node: NodeDevices, req: DeviceRequest) -> None:
    result = fit(node, req)
    if result.ok:
        after = allocate(node, req, result.devices)
        assert all(0 <= used <= 1000 for used in after.used_milli)
        assert all(
            0 <= used <= total
            for used, total in zip(after.used_memory_mib, after.memory_mib, strict=True)
        )
        assert release(after, req, result.devices) == node
        assert max_feasible_count(node, req) >= req.count
    elif result.code is UNRESOLVABLE:
        assert not fit(node.emptied(), req).ok
        assert not fit(node.emptied(heal=True), req).ok
    else:
        assert result.devices == ()
