"""What the scheduling loop carries from one written cycle to the next: the preemptors' holds
(`holds.py`) and the jobs the last cycle parked (`federation.scheduling.parking`).

Both are advanced only once a cycle's decisions are written: a cycle whose write failed
(lost leadership, database down) leaves nothing parked, and its preemptions hold nothing.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import replace

from federation.controllers.holds import Hold, Holds
from federation.scheduling.decisions import CycleResult
from federation.scheduling.model import Snapshot
from federation.scheduling.parking import Parked


class Carried:
    """The holds and the parked jobs between cycles."""

    def __init__(self, margin_s: float) -> None:
        self.holds = Holds(margin_s)  # capacity freed for preemptors
        self._parked: Parked | None = None  # what the last written cycle parked

    def begin(
        self, snapshot: Snapshot, pending: Container[str], now: float
    ) -> tuple[Snapshot, Parked | None, list[Hold]]:
        """For a cycle at `now` over `pending` job ids: `snapshot` with the holds of the
        preemptors still pending added, what the last written cycle parked, and the holds that
        expired (dropped). Nothing stays parked until this cycle is `written`."""
        expired = self.holds.expire(now)
        held = self.holds.reservations(pending)
        parked, self._parked = self._parked, None
        return replace(snapshot, reservations=snapshot.reservations + held), parked, expired

    def written(self, result: CycleResult, now: float, pending: Container[str]) -> None:
        """After the cycle begun at `now` is written: keep what it parked, settle the holds."""
        self._parked = result.parked
        self.holds.settle(result, now, pending)
