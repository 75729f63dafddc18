"""The cluster's lease, renewed from a thread of its own.

A lease renewal must not share fate with the agent's work: an agent busy reconciling a burst
of assignments (a long stretch of CPU on its event loop, or a slow cluster API it awaits) would
otherwise renew late, and the hub would declare a healthy cluster lost and requeue its jobs,
which only adds to the burst. kubelet renews its node lease from a goroutine of its own for the
same reason. Here the renewals run on an event loop in a daemon thread (`LoopThread`), with
their own HTTP session (`HubApi` keeps one per event loop); the interpreter switches threads
every few milliseconds, so a renewal goes out on time however busy the agent's loop is.

Losing the lease (no renewal accepted for a whole lease) is handed to the agent's own loop
(`on_lost`), which stops its exclusive jobs; the thread only renews and keeps time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from cluster_agents.agent.hub_client import HubApi, HubRejected, HubUnavailable
from federation.aio import LoopThread, cancel_all
from federation.wire.agent import LeaseRenewal

log = logging.getLogger(__name__)


class LeaseRenewer:
    """Renews the cluster's lease every `renew_s` (both periods learnt from the hub's replies)."""

    def __init__(
        self,
        hub: HubApi,
        problem: Callable[[], str | None],
        on_lost: Callable[[], None],
    ) -> None:
        """`problem` says why the agent cannot reach its kube-apiserver (None: it can), read at
        each renewal; `on_lost` is called on the agent's event loop while the lease is lost."""
        self.hub = hub
        self.problem = problem
        self.on_lost = on_lost
        self.lease_s = 8.0
        self.renew_s = 2.0
        self.renewed = time.monotonic()  # when the last renewal the hub accepted was sent
        self._thread = LoopThread("lease")
        self._task: asyncio.Task[None] | None = None  # waits on the renewals in the thread
        self._agent_loop: asyncio.AbstractEventLoop | None = None

    @property
    def lost(self) -> bool:
        """Whether the last renewal the hub accepted is older than a lease."""
        return time.monotonic() - self.renewed > self.lease_s

    @property
    def age_s(self) -> float:
        """Seconds since the last accepted renewal was sent."""
        return time.monotonic() - self.renewed

    def start(self) -> None:
        """Start renewing (from the agent's event loop)."""
        self._agent_loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._thread.call(self._run()))

    async def stop(self) -> None:
        """Stop renewing, a renewal in flight included, and wait for the thread to end."""
        if self._task is None:
            return
        await cancel_all([self._task])
        self._task = None
        await self._thread.stop()

    async def _run(self) -> None:
        try:
            while True:
                wait_s = await self.renew()
                if self.lost and self._agent_loop is not None:
                    self._agent_loop.call_soon_threadsafe(self.on_lost)
                await asyncio.sleep(wait_s)
        finally:
            await self.hub.close()  # this loop's session

    async def renew(self) -> float:
        """One renewal, waiting up to what the lease leaves (a slow hub may still record it);
        the seconds until the next one: `renew_s`, or sooner where the hub refused this one
        and said when to send it again (a renewal its database rolled back): waiting the whole
        period after a refusal would leave the cluster silent for two periods, NotReady."""
        problem = self.problem()
        sent = time.monotonic()
        try:
            reply = await self.hub.lease(
                LeaseRenewal(apiserver_reachable=problem is None, problem=problem or ""),
                timeout_s=max(self.renew_s, self.lease_s - self.renew_s),
                hedge_after_s=self.renew_s,
            )
        except HubUnavailable as exc:
            log.info("lease not renewed: %s", exc)
            said = exc.retry_after_s
            return self.renew_s if said is None else min(self.renew_s, said)
        except HubRejected as exc:  # not registered yet
            log.info("lease not renewed: %s", exc)
            return self.renew_s
        self.renewed = sent
        self.lease_s, self.renew_s = reply.lease_s, reply.renew_s
        return self.renew_s
