"""How a service's desired replicas are shared among its shards, as caps (pure).

- A service runs on at least min(spread, desired) shards while clusters are left to open
  them on; a shard to open takes its even share of `desired` (older shards take the
  remainder), which the others give up.
- A stuck shard (one that could not grow to its cap: its cluster has no room) keeps what it
  holds as its cap; the rest goes to the shards that are not stuck, the one with the lowest
  cap first (the oldest among equals), or, when every shard is stuck, to a new shard on
  another cluster. A stuck shard that holds nothing (it waits: its cluster was lost, or none
  of its clusters has room) keeps a cap of 1, to start with when it is placed, and counts
  for none of `desired`: the others hold all of it meanwhile.
- Scaling in lowers the caps of the shards beyond `spread` first, the newest first (they were
  opened for overflow), then the largest cap (the newest among equals). A shard whose cap
  reaches 0 is closed: a service never has more shards than replicas.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Share:
    """A live shard as the sharing sees it, oldest first in the list it comes in."""

    key: Hashable
    cap: int
    held: int
    stuck: bool = False


@dataclass(frozen=True)
class Shares:
    """Each live shard's new cap (0: close it) and the caps of the shards to open, in order."""

    caps: dict[Hashable, int]
    new: tuple[int, ...]


def _even(total: int, parts: int) -> list[int]:
    """`total` split in `parts`, the first ones taking the remainder."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def distribute(desired: int, spread: int, shards: Sequence[Share], room: bool) -> Shares:
    """The caps that share `desired` among `shards` (oldest first) by the module's rules;
    `room`: whether a cluster is left to open a new shard on."""
    caps = {s.key: (min(s.cap, max(s.held, 1)) if s.stuck else s.cap) for s in shards}
    waiting = {s.key for s in shards if s.stuck and s.held == 0}
    order = [s.key for s in shards]
    missing = max(min(spread, desired) - len(shards), 0) if room else 0
    new = _even(desired, len(shards) + missing)[len(shards) :] if missing else []
    total = sum(c for k, c in caps.items() if k not in waiting) + sum(new)
    while total > desired:
        counted = [k for k in order if k not in waiting]
        beyond = [k for k in counted[spread:] if caps[k] > 0]
        pick = beyond[-1] if beyond else max(reversed(counted), key=lambda k: caps[k])
        caps[pick] -= 1
        total -= 1
    if total < desired:
        receivers: list[tuple[str, int]] = [("old", i) for i, s in enumerate(shards) if not s.stuck]
        receivers += [("new", i) for i in range(len(new))]
        if not receivers and room and len(shards) < desired:
            new.append(0)
            receivers.append(("new", 0))

        def cap(r: tuple[str, int]) -> int:
            return caps[order[r[1]]] if r[0] == "old" else new[r[1]]

        while receivers and total < desired:
            kind, i = min(receivers, key=cap)  # the first of the lowest: the oldest
            if kind == "old":
                caps[order[i]] += 1
            else:
                new[i] += 1
            total += 1
    return Shares(caps, tuple(new))
