"""Sharing a service's replicas among its shards: even split, stuck shards, overflow shards,
scale-in from the newest overflow shard; caps sum to desired and no shard is empty."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from federation.service_shares import Share, Shares, distribute

SETTINGS = settings(max_examples=500, deadline=None, derandomize=True)


def test_a_new_service_opens_its_spread_with_even_shares_older_first() -> None:
    assert distribute(4, 2, [], room=True) == Shares({}, (2, 2))
    assert distribute(5, 3, [], room=True) == Shares({}, (2, 2, 1))
    assert distribute(1, 2, [], room=True) == Shares({}, (1,))  # never more shards than replicas


def test_a_shard_to_open_takes_its_share_from_the_others() -> None:
    shares = distribute(4, 2, [Share("a", cap=4, held=4)], room=True)
    assert shares == Shares({"a": 2}, (2,))
    alone = distribute(4, 2, [Share("a", cap=2, held=2)], room=False)  # nowhere to open one
    assert alone == Shares({"a": 4}, ())


def test_growth_goes_to_the_lowest_cap_oldest_first() -> None:
    shards = [Share("a", cap=1, held=1), Share("b", cap=1, held=1)]
    assert distribute(6, 2, shards, room=True) == Shares({"a": 3, "b": 3}, ())
    assert distribute(5, 2, shards, room=True).caps == {"a": 3, "b": 2}


def test_a_stuck_shard_keeps_what_it_holds_and_its_deficit_moves() -> None:
    shards = [Share("a", cap=3, held=2, stuck=True), Share("b", cap=3, held=3)]
    assert distribute(6, 2, shards, room=True) == Shares({"a": 2, "b": 4}, ())
    both = [Share("a", cap=3, held=2, stuck=True), Share("b", cap=3, held=2, stuck=True)]
    assert distribute(6, 2, both, room=True) == Shares({"a": 2, "b": 2}, (2,))  # overflow
    assert distribute(6, 2, both, room=False) == Shares({"a": 2, "b": 2}, ())


def test_a_waiting_stuck_shard_keeps_a_cap_of_one_and_the_others_hold_all() -> None:
    # b's cluster was lost: it waits (holds nothing) with a cap of 1 to restart with
    shards = [Share("a", 2, 2), Share("b", 2, 0, stuck=True)]
    assert distribute(4, 2, shards, room=False) == Shares({"a": 4, "b": 1}, ())
    # once b runs again the total is over by one, taken from the largest
    back = [Share("a", 4, 4), Share("b", 1, 1)]
    assert distribute(4, 2, back, room=False) == Shares({"a": 3, "b": 1}, ())


def test_scale_in_empties_the_newest_overflow_shard_first_then_the_largest() -> None:
    shards = [Share("a", 2, 2), Share("b", 2, 2), Share("c", 1, 1), Share("d", 1, 1)]
    assert distribute(5, 2, shards, room=True).caps == {"a": 2, "b": 2, "c": 1, "d": 0}
    assert distribute(4, 2, shards, room=True).caps == {"a": 2, "b": 2, "c": 0, "d": 0}
    assert distribute(3, 2, shards, room=True).caps == {"a": 2, "b": 1, "c": 0, "d": 0}
    assert distribute(1, 2, shards, room=True).caps == {"a": 1, "b": 0, "c": 0, "d": 0}


@st.composite
def situations(draw: st.DrawFn) -> tuple[int, int, list[Share], bool]:
    spread = draw(st.integers(1, 4))
    caps = draw(st.lists(st.integers(1, 12), max_size=6))
    shards = []
    for i, cap in enumerate(caps):
        held = draw(st.integers(1, cap))
        shards.append(Share(i, cap, held, stuck=held < cap and draw(st.booleans())))
    return draw(st.integers(1, 40)), spread, shards, draw(st.booleans())


@SETTINGS
@given(situations())
def test_caps_sum_to_desired_no_live_shard_is_empty_and_shards_never_exceed_replicas(
    situation: tuple[int, int, list[Share], bool],
) -> None:
    desired, spread, shards, room = situation
    shares = distribute(desired, spread, shards, room)
    live = [c for c in shares.caps.values() if c > 0]
    total = sum(live) + sum(shares.new)
    assert all(c >= 0 for c in shares.caps.values()) and all(c >= 1 for c in shares.new)
    assert len(live) + len(shares.new) <= desired
    assert total <= max(desired, 0)
    if not any(s.stuck for s in shards) and (shards or room):
        assert total == desired
    if room and not any(s.stuck for s in shards):
        assert len(live) + len(shares.new) >= min(spread, desired)
    stuck = {s.key: s.held for s in shards if s.stuck}
    kept = sum(s.held if s.stuck else s.cap for s in shards)
    if kept <= desired and len(shards) >= min(spread, desired):  # no scale-in: stuck keep
        assert all(shares.caps[k] == held for k, held in stuck.items())
