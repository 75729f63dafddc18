"""The chaos suite: real processes under a seeded fault injector, and an invariant checker.

Two `suanpan-hub serve` replicas on one PostgreSQL; an agent per simulated cluster as its own
process (`python -m deploy.sim_agent`), reaching each hub through a loopback proxy the suite
controls. A steady workload submits short jobs with idempotency keys (some submitted twice),
cancels some, while the injector applies, at seeded times: `kill -9` of the leader or the
follower (restarted after a while), `kill -9` of an agent, a partition of an agent from both
hubs, a delay on its links, a PostgreSQL restart. After the faults heal, the checker reads
the database:

- every acknowledged submission exists exactly once, under the id it was acknowledged with;
- no job has two active placements, and an active placement's epoch is its job's;
- after healing no job is stuck in Placed, Dispatched or Preempting;
- no hub or agent process exited by itself.

`python -m bench.chaos --seed N --faults K` (`make chaos`); a failing invariant prints the
seed. A short run is `tests/integration/test_chaos.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from bench.failover import ADMIN, CLUSTERS, Agents, Api, Hubs, setup_tenancy
from deploy.netproxy import Proxy
from federation.store import migrate
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres
from federation.store.tables import events, jobs, placements

FAULTS = ("kill_leader", "kill_follower", "kill_agent", "partition", "delay", "db_restart")
STUCK = ("Placed", "Dispatched", "Preempting")


@dataclass
class Report:
    """What a run did and found."""

    seed: int
    faults: Counter[str] = field(default_factory=Counter)
    submitted: int = 0
    cancelled: int = 0
    violations: list[str] = field(default_factory=list)
    heal_s: float = 0.0

    def lines(self) -> list[str]:
        """A human-readable summary."""
        return [
            f"seed {self.seed}: faults {dict(self.faults)}, {self.submitted} jobs, "
            f"{self.cancelled} cancelled, converged {self.heal_s:.1f} s after healing",
            *(f"VIOLATION (seed {self.seed}): {v}" for v in self.violations),
        ]


class Chaos:
    """The processes of one run and the faults applied to them."""

    def __init__(self, seed: int, workdir: Path) -> None:
        self.rng = random.Random(seed)  # the faults: their kinds, times and durations
        self.load_rng = random.Random(-seed)  # the workload (apart, so faults replay exactly)
        self.workdir = workdir
        self.report = Report(seed)
        self.pg = EmbeddedPostgres(workdir / "pg")
        self.url = ""
        self.hubs: Hubs | None = None
        self.proxies: dict[str, list[Proxy]] = {}
        self.agents: Agents | None = None
        self.acked: dict[str, str] = {}  # idempotency key -> job id acknowledged

    async def start(self) -> Api:
        self.url = await self.pg.start()
        await migrate.upgrade(self.url)
        db = Database(self.url, pool_size=1)
        await ensure_admin_token(db, ADMIN)
        await db.close()
        self.hubs = Hubs(self.url, self.workdir)
        for port in self.hubs.ports:
            await self.hubs.start(port)
        api = Api(self.hubs)
        tokens = await setup_tenancy(api)
        for cluster in CLUSTERS:
            self.proxies[cluster] = [Proxy(port) for port in self.hubs.ports]
            for proxy in self.proxies[cluster]:
                await proxy.start()
        urls = {c: [p.url for p in self.proxies[c]] for c in CLUSTERS}
        self.agents = Agents(urls, tokens, self.workdir)
        for cluster in CLUSTERS:
            await self.agents.start(cluster)
        return api

    async def workload(self, api: Api, stop: asyncio.Event) -> None:
        """Submit (some twice, by key), cancel some, until stopped."""
        n = 0
        while not stop.is_set():
            n += 1
            key = f"chaos-{self.report.seed}-{n}"
            failover = self.load_rng.choice(("fast", "exclusive"))
            run_s = self.load_rng.choice((60, 200))
            job_id = await api.submit(f"w{n}", key=key, run_s=run_s, failover=failover)
            self.acked[key] = job_id
            if self.load_rng.random() < 0.2:  # a client retry: must answer the same job
                again = await api.submit(f"w{n}", key=key, run_s=run_s, failover=failover)
                if again != job_id:
                    self.report.violations.append(f"key {key}: {job_id} then {again}")
            if self.load_rng.random() < 0.15:
                await api.cancel(self.load_rng.choice(list(self.acked.values())))
                self.report.cancelled += 1
            await asyncio.sleep(self.load_rng.uniform(0.2, 0.6))

    async def inject(self, kind: str) -> None:
        """Apply one fault and heal it after a seeded while."""
        assert self.hubs is not None and self.agents is not None
        self.report.faults[kind] += 1
        print(f"{time.strftime('%T')} fault {kind}", file=sys.stderr, flush=True)
        hold = self.rng.uniform(1.0, 12.0)
        if kind in ("kill_leader", "kill_follower"):
            leader = await self.hubs.leader()
            victim = (
                leader if kind == "kill_leader" else next(p for p in self.hubs.ports if p != leader)
            )
            if victim in self.hubs.procs:
                self.hubs.kill(victim)
                await asyncio.sleep(min(hold, 3.0))
                await self.hubs.start(victim)
        elif kind == "kill_agent":
            cluster = self.rng.choice(CLUSTERS)
            self.agents.kill(cluster)
            await asyncio.sleep(hold)
            await self.agents.start(cluster)
        elif kind in ("partition", "delay"):
            links = self.proxies[self.rng.choice(CLUSTERS)]
            for proxy in links:
                if kind == "partition":
                    proxy.cut()
                else:
                    proxy.delay_s = self.rng.uniform(0.05, 0.5)
            await asyncio.sleep(hold)
            for proxy in links:
                proxy.heal()
                proxy.delay_s = 0.0
        else:
            await self.pg.stop()
            await asyncio.sleep(min(hold, 5.0))
            self.pg = EmbeddedPostgres(self.workdir / "pg")
            await self.pg.start()

    async def check(self) -> None:
        """The invariants, once the faults healed (waiting for convergence up to 90 s)."""
        assert self.hubs is not None and self.agents is not None
        db = Database(self.url, pool_size=1)
        try:
            healed = time.monotonic()
            while True:
                async with db.connection() as conn:
                    stuck = (
                        await conn.execute(
                            sa.select(jobs.c.id, jobs.c.state).where(jobs.c.state.in_(STUCK))
                        )
                    ).all()
                if not stuck or time.monotonic() - healed > 90:
                    break
                await asyncio.sleep(0.5)
            self.report.heal_s = time.monotonic() - healed
            async with db.connection() as conn:
                for job_id, state in stuck:
                    trail = (
                        await conn.execute(
                            sa.select(events.c.reason)
                            .where(events.c.job_id == job_id)
                            .order_by(events.c.id)
                        )
                    ).scalars()
                    self.report.violations.append(
                        f"job {job_id} stuck {state} after healing (events: {', '.join(trail)})"
                    )
                rows = (await conn.execute(sa.select(jobs.c.idempotency_key, jobs.c.id))).all()
                doubled = (
                    await conn.execute(
                        sa.select(placements.c.job_id)
                        .where(placements.c.state == "Active")
                        .group_by(placements.c.job_id)
                        .having(sa.func.count() > 1)
                    )
                ).all()
                wrong_epoch = (
                    await conn.execute(
                        sa.select(jobs.c.id)
                        .join(placements, placements.c.job_id == jobs.c.id)
                        .where(placements.c.state == "Active", placements.c.epoch != jobs.c.epoch)
                    )
                ).all()
            by_key = Counter(k for k, _ in rows)
            ids = {k: str(i) for k, i in rows}
            for key, job_id in self.acked.items():
                if by_key[key] != 1 or ids.get(key) != job_id:
                    self.report.violations.append(f"key {key}: {by_key[key]} jobs, not {job_id}")
            self.report.violations += [f"job {j} has two active placements" for (j,) in doubled]
            self.report.violations += [f"job {j} active at an old epoch" for (j,) in wrong_epoch]
            for name, proc in [*self.hubs.procs.items(), *self.agents.procs.items()]:
                if proc.returncode is not None:
                    self.report.violations.append(f"{name} exited by itself ({proc.returncode})")
        finally:
            await db.close()

    async def close(self) -> None:
        if self.agents is not None:
            await self.agents.close()
        if self.hubs is not None:
            await self.hubs.close()
        for links in self.proxies.values():
            for proxy in links:
                await proxy.close()
        await self.pg.stop()


def schedule(rng: random.Random, faults: int, at_least: Mapping[str, int]) -> list[str]:
    """The kinds of `faults` faults in order: `at_least[kind]` of each kind named (the long
    run's), the rest drawn at random, all shuffled by `rng`."""
    kinds = [kind for kind, n in at_least.items() for _ in range(n)]
    kinds += [rng.choice(FAULTS) for _ in range(max(0, faults - len(kinds)))]
    rng.shuffle(kinds)
    return kinds


async def run_chaos(seed: int, faults: int, at_least: Mapping[str, int] | None = None) -> Report:
    """One seeded run of `faults` faults (at least `at_least[kind]` of the kinds named); the
    report holds any violation."""
    with tempfile.TemporaryDirectory(prefix="suanpan-chaos-") as tmp:
        chaos = Chaos(seed, Path(tmp))
        try:
            api = await chaos.start()
            stop = asyncio.Event()
            load = asyncio.create_task(chaos.workload(api, stop))
            # without counts each kind is drawn after its wait, so the seeds found replay
            kinds = schedule(chaos.rng, faults, at_least) if at_least else None
            for i in range(faults if kinds is None else len(kinds)):
                await asyncio.sleep(chaos.rng.uniform(0.5, 4.0))
                await chaos.inject(chaos.rng.choice(FAULTS) if kinds is None else kinds[i])
            stop.set()
            await load
            chaos.report.submitted = len(chaos.acked)
            await chaos.check()
        finally:
            await chaos.close()
        return chaos.report


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.chaos --seed N --faults K`: exit 1 on any violation."""
    p = argparse.ArgumentParser(
        prog="python -m bench.chaos",
        description=__doc__,
        epilog="the long run (make chaos-long): --kill-leader 100 --db-restart 20 --partition 50",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--faults", type=int, default=20)
    for kind in FAULTS:
        p.add_argument(
            f"--{kind.replace('_', '-')}",
            type=int,
            default=0,
            metavar="N",
            help=f"at least N faults {kind}",
        )
    args = p.parse_args(argv)
    at_least = {kind: getattr(args, kind) for kind in FAULTS if getattr(args, kind)}
    report = asyncio.run(run_chaos(args.seed, args.faults, at_least))
    print("\n".join(report.lines()))
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
