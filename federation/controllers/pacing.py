"""How much of a long queue each scheduling cycle considers, sized so that a cycle takes about
the configured time.

A cycle's cost grows with the jobs it considers (reading, deciding and writing each), and a
job submitted while a cycle runs waits for the next one: on a busy hub, cycles over the whole
head of a 10,000-job queue took 10-14 s. `Pace` sizes the window of the next cycle from the
last one's time per job considered, so that cycles take about `target_s` whatever the hub's
share of the machine; every queued job is still considered within a bounded number of cycles
(`Window`). Only the window moves: what a cycle decides for the jobs it considers does not
depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass

LARGEST = 5000  # jobs a cycle considers at most
# and at least, while that many wait: a cycle has a cost of its own (reading every held job,
# ~0.4 s under the fleet benchmark's load), and below this the loop's throughput collapses
# (200: 270 decisions/s instead of 500, a 10,000-job burst placed in 21 s instead of 9)
SMALLEST = 1000
FIRST = 2000  # the first cycle's, until one was timed


@dataclass(frozen=True, slots=True)
class Window:
    """The queued jobs a cycle considers: the `head` of the queue (by priority, then time
    queued) every cycle, and `rotating` of the rest, continuing where the last cycle stopped,
    so that every queued job is considered within ceil((queued - head) / rotating) cycles."""

    head: int
    rotating: int

    @classmethod
    def of(cls, size: int) -> Window:
        """A window of `size` jobs, half of them the head."""
        return cls(size // 2, size - size // 2)


WHOLE = Window.of(LARGEST)  # the largest window


class Pace:
    """The window of the next cycle: the size that made the last cycle take `target_s`, at
    most twice or half the last size (one slow cycle does not collapse it), within
    [`smallest`, `largest`]."""

    def __init__(
        self,
        target_s: float,
        *,
        smallest: int = SMALLEST,
        largest: int = LARGEST,
        first: int = FIRST,
    ) -> None:
        if not 0 < smallest <= largest:
            raise ValueError("pace: need 0 < smallest <= largest")
        self.target_s = target_s
        self.smallest = smallest
        self.largest = largest
        self.size = min(max(first, smallest), largest)

    @property
    def window(self) -> Window:
        """The window of the next cycle."""
        return Window.of(self.size)

    def observe(self, considered: int, seconds: float) -> None:
        """A cycle considered `considered` queued jobs in `seconds` (all of it: read, core,
        write); a cycle that considered none says nothing of the cost per job."""
        if considered <= 0:
            return
        fits = self.target_s * considered / max(seconds, 1e-6)
        size = min(max(fits, self.size / 2), self.size * 2)
        self.size = int(min(max(size, self.smallest), self.largest))
