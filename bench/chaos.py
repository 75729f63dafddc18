"""The chaos suite: real processes under a seeded fault injector, and an invariant checker.

Two `suanpan-hub serve` replicas on one PostgreSQL, each reaching it through a loopback proxy
the suite controls; an agent per simulated cluster as its own process (`python -m
deploy.sim_agent`) and, with `kube`, the real `suanpan-agent` over a local Kubernetes cluster
(kube-apiserver, kube-scheduler calling the extender, kwok nodes); every agent reaches each hub
through a proxy of its own. A steady workload submits jobs (fast and exclusive) with
idempotency keys (some submitted twice) and cancels some, while the injector applies, at seeded
times: `kill -9` of the leader or the follower (restarted after a while), the leader frozen
(SIGSTOP, then SIGCONT), the leader's database connections cut, `kill -9` of an agent (of the
real cluster's, `kill_real_agent`), a partition of an agent from both hubs, a delay on its
links, a PostgreSQL restart, and the real cluster's kube-apiserver stopped and started again.

The checker reads the database after the faults heal:

- every acknowledged submission exists exactly once, under the id it was acknowledged with;
- no job has two active placements, or two placements of one epoch (what a deposed leader
  writing beside the new one would leave), and an active placement's epoch is its job's;
- after healing no job is stuck in Placed, Dispatched or Preempting;
- no hub or agent process exited by itself; scheduling resumed after every leader fault;

and the real cluster throughout (`bench.chaos_pods`): no node's devices over capacity, an
exclusive job never running at two epochs, fast jobs' double runs counted and bounded.

Recovery times: detection (an agent killed or cut off, or its apiserver stopped → the cluster
Offline at the hub, from the hub's events), takeover (a leader killed, frozen or cut from its
database → the other replica leads) and requeue-to-running (a job's ClusterLost → Running).

`python -m bench.chaos --seed N --faults K` (`make chaos`); a failing invariant prints the
seed. A short run without a real cluster is `tests/integration/test_chaos.py`, one with it
`tests/e2e/test_chaos_cluster.py`; `make bench` runs the `run()` configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from bench.chaos_pods import PodWatch
from bench.failover import (
    CLUSTERS,
    Agents,
    Api,
    Hubs,
    clear_pods,
    hub_database,
    leads,
    setup_tenancy,
    until,
)
from bench.results import Figure, write_figure
from deploy.local.binaries import ensure_binaries
from deploy.local.clusters import (
    ClusterState,
    Environment,
    down,
    start_component,
    stop_component,
    up,
)
from deploy.local.extender import ExtenderProcess
from deploy.local.processes import free_ports
from deploy.netproxy import Proxy
from federation.hubconfig import HealthConfig
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres
from federation.store.tables import clusters, events, jobs, placements

FAULTS = (
    "kill_leader",
    "kill_follower",
    "kill_agent",
    "partition",
    "delay",
    "db_restart",
    "freeze_leader",
    "cut_leader_db",
)
KUBE_FAULTS = ("stop_apiserver", "kill_real_agent")  # only with a real cluster
STUCK = ("Placed", "Dispatched", "Preempting")
REAL = "kube-beijing"  # the real cluster's name at the hub
LOST = (
    "kill_agent",
    "kill_real_agent",
    "partition",
    "stop_apiserver",
)  # faults that can lose a cluster
BENCH = Path(__file__).resolve().parent
LEASE_S, RENEW_S = HealthConfig().offline_after_s, HealthConfig().renew_s  # the hubs' defaults


@dataclass
class Report:
    """What a run did, found and measured."""

    seed: int
    kube: bool = False
    faults: Counter[str] = field(default_factory=Counter)
    submitted: int = 0
    cancelled: int = 0
    violations: list[str] = field(default_factory=list)
    heal_s: float = 0.0
    recovery: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    windows: list[float] = field(default_factory=list)  # fast double runs on the real cluster
    pod_samples: int = 0

    def lines(self) -> list[str]:
        """A human-readable summary."""
        times = ", ".join(
            f"{kind} p50 {percentile(v, 50):.1f} s / p99 {percentile(v, 99):.1f} s (n={len(v)})"
            for kind, v in sorted(self.recovery.items())
        )
        return [
            f"seed {self.seed}{' (with a real cluster)' if self.kube else ''}: faults"
            f" {dict(self.faults)}, {self.submitted} jobs, {self.cancelled} cancelled, converged"
            f" {self.heal_s:.1f} s after healing; {times or 'no recovery measured'};"
            f" {len(self.windows)} fast double runs (longest {max(self.windows, default=0):.1f} s)"
            f" in {self.pod_samples} pod samples",
            *(f"VIOLATION (seed {self.seed}): {v}" for v in self.violations),
        ]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank; the max for p99 at these counts); 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


@dataclass(frozen=True)
class Fault:
    """One fault applied: its kind, its target (a cluster, or a hub's port) and when."""

    kind: str
    target: str
    at: float  # time.time() when it began
    hold: float


@dataclass(frozen=True)
class Kube:
    """The real cluster of a run."""

    env: Environment
    cs: ClusterState


class Chaos:
    """The processes of one run and the faults applied to them."""

    def __init__(self, seed: int, workdir: Path, kube: Kube | None = None) -> None:
        self.rng = random.Random(seed)  # the faults: their kinds, times and durations
        self.load_rng = random.Random(-seed)  # the workload (apart, so faults replay exactly)
        self.workdir = workdir
        self.kube = kube
        self.report = Report(seed, kube=kube is not None)
        self.clusters = [*CLUSTERS, REAL] if kube else list(CLUSTERS)
        self.pg = EmbeddedPostgres(workdir / "pg")
        self.url = ""
        self.hubs: Hubs | None = None
        self.db_links: dict[int, Proxy] = {}  # a hub replica's link to PostgreSQL
        self.proxies: dict[str, list[Proxy]] = {}
        self.agents: Agents | None = None
        self.watch: PodWatch | None = None
        self.applied: list[Fault] = []
        self.acked: dict[str, str] = {}  # idempotency key -> job id acknowledged

    async def start(self) -> Api:
        self.url = await hub_database(self.pg)
        self.hubs = Hubs(self.url, self.workdir)
        for port in self.hubs.ports:
            self.db_links[port] = link = Proxy(target_path=self._socket())
            await link.start()
            self.hubs.db_urls[port] = f"postgresql://postgres@127.0.0.1:{link.port}/postgres"
            await self.hubs.start(port)
        api = Api(self.hubs)
        tokens = await setup_tenancy(api, self.clusters)
        for cluster in self.clusters:
            self.proxies[cluster] = [Proxy(port) for port in self.hubs.ports]
            for proxy in self.proxies[cluster]:
                await proxy.start()
        urls = {c: [p.url for p in self.proxies[c]] for c in self.clusters}
        kubeconfigs = {REAL: self.kube.cs.kubeconfig} if self.kube else {}
        self.agents = Agents(urls, tokens, self.workdir, kubeconfigs)
        for cluster in self.clusters:
            await self.agents.start(cluster)
        if self.kube:
            self.watch = PodWatch(self.kube.cs, REAL, Database(self.url, pool_size=1))
        return api

    def _socket(self) -> str:
        """The unix socket of the PostgreSQL server."""
        url = make_url(self.url)
        return f"{url.query['host']}/.s.PGSQL.{url.port or 5432}"

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
        if self.watch is not None:
            self.watch.fault(begins=True)
        try:
            await self._apply(kind, hold)
        finally:
            if self.watch is not None:
                self.watch.fault(begins=False)

    def _alive(self, name: str, proc: asyncio.subprocess.Process, log: Path) -> None:
        """A violation, with its last output (the cause, not a guess), if `proc` has exited
        by itself (checked before the suite kills it, and at the end)."""
        if proc.returncode is not None:
            tail = log.read_text()[-1500:] if log.exists() else ""
            self.report.violations.append(f"{name} exited by itself ({proc.returncode}):\n{tail}")

    async def _apply(self, kind: str, hold: float) -> None:
        assert self.hubs is not None and self.agents is not None
        at = time.time()
        if kind in ("kill_leader", "kill_follower", "freeze_leader", "cut_leader_db"):
            leader = await self.hubs.leader()
            victim = leader if kind != "kill_follower" else self._other(leader)
            self.applied.append(Fault(kind, str(victim), at, hold))
            if victim not in self.hubs.procs:
                return
            if kind in ("kill_leader", "kill_follower"):
                self._alive(str(victim), self.hubs.procs[victim], self.hubs.log_path(victim))
                self.hubs.kill(victim)
                if kind == "kill_leader":
                    await self._takeover(kind, victim)
                await asyncio.sleep(min(hold, 3.0))
                await self.hubs.start(victim)
            elif kind == "freeze_leader":
                self.hubs.signal_all(victim, signal.SIGSTOP)
                await self._takeover(kind, victim)
                await asyncio.sleep(hold)
                self.hubs.signal_all(victim, signal.SIGCONT)
            else:
                self.db_links[victim].cut()
                await self._takeover(kind, victim)
                await asyncio.sleep(hold)
                self.db_links[victim].heal()
        elif kind in ("kill_agent", "kill_real_agent"):
            cluster = self.rng.choice(self.clusters) if kind == "kill_agent" else REAL
            self.applied.append(Fault(kind, cluster, at, hold))
            self._alive(cluster, self.agents.procs[cluster], self.agents.log_path(cluster))
            self.agents.kill(cluster)
            await asyncio.sleep(hold)
            await self.agents.start(cluster)
        elif kind in ("partition", "delay"):
            cluster = self.rng.choice(self.clusters)
            self.applied.append(Fault(kind, cluster, at, hold))
            links = self.proxies[cluster]
            for proxy in links:
                if kind == "partition":
                    proxy.cut()
                else:
                    proxy.delay_s = self.rng.uniform(0.05, 0.5)
            await asyncio.sleep(hold)
            for proxy in links:
                proxy.heal()
                proxy.delay_s = 0.0
        elif kind == "stop_apiserver":
            assert self.kube is not None
            self.applied.append(Fault(kind, REAL, at, hold))
            await stop_component(self.kube.cs, "kube-apiserver")
            await asyncio.sleep(hold)
            await start_component(self.kube.env, self.kube.cs, "kube-apiserver")
        else:
            self.applied.append(Fault(kind, "", at, hold))
            await self.pg.stop()
            await asyncio.sleep(min(hold, 5.0))
            self.pg = EmbeddedPostgres(self.workdir / "pg")
            await self.pg.start()

    def _other(self, port: int) -> int:
        assert self.hubs is not None
        return next(p for p in self.hubs.ports if p != port)

    async def _takeover(self, kind: str, old: int) -> None:
        """Time until the other replica leads (a violation when it never does)."""
        assert self.hubs is not None
        other = self._other(old)
        if other not in self.hubs.procs:
            return
        try:
            took = await until("takeover", partial(leads, other), 30)
        except TimeoutError:
            self.report.violations.append(f"{kind}: the other replica did not lead within 30 s")
            return
        self.report.recovery["takeover"].append(took)
        self.report.recovery[f"takeover_{kind}"].append(took)

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
                fencing = self.watch.open_windows if self.watch else 0
                if (not stuck and not fencing) or time.monotonic() - healed > 90:
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
                await self._placements(conn)
                await self._recovery(conn)
            for port, proc in self.hubs.procs.items():
                self._alive(str(port), proc, self.hubs.log_path(port))
            for cluster, proc in self.agents.procs.items():
                self._alive(cluster, proc, self.agents.log_path(cluster))
        finally:
            await db.close()

    async def _placements(self, conn: AsyncConnection) -> None:
        rows = (await conn.execute(sa.select(jobs.c.idempotency_key, jobs.c.id))).all()
        doubled = (
            await conn.execute(
                sa.select(placements.c.job_id)
                .where(placements.c.state == "Active")
                .group_by(placements.c.job_id)
                .having(sa.func.count() > 1)
            )
        ).all()
        same_epoch = (
            await conn.execute(
                sa.select(placements.c.job_id, placements.c.epoch)
                .group_by(placements.c.job_id, placements.c.epoch)
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
        self.report.violations += [f"job {j} placed twice at epoch {e}" for j, e in same_epoch]
        self.report.violations += [f"job {j} active at an old epoch" for (j,) in wrong_epoch]

    async def _recovery(self, conn: AsyncConnection) -> None:
        """Detection and requeue-to-running, from the hub's events."""
        offline = (
            await conn.execute(
                sa.select(clusters.c.name, events.c.created_at)
                .join(clusters, clusters.c.id == events.c.cluster_id)
                .where(events.c.kind == "Cluster", events.c.reason == "Offline")
            )
        ).all()
        # a fault cannot lose its cluster before the lease less one renewal (the renewal just
        # before it): an Offline sooner belongs to an earlier fault of that cluster
        soonest = LEASE_S - RENEW_S
        for fault in self.applied:
            if fault.kind in LOST:
                seen = [
                    t.timestamp() - fault.at
                    for name, t in offline
                    if name == fault.target
                    and soonest <= t.timestamp() - fault.at <= fault.hold + 5
                ]
                if seen:
                    self.report.recovery["detection"].append(min(seen))
        trail = (
            await conn.execute(
                sa.select(events.c.job_id, events.c.reason, events.c.created_at)
                .where(events.c.reason.in_(("ClusterLost", "Running")))
                .order_by(events.c.id)
            )
        ).all()
        lost: dict[str, float] = {}
        for job_id, reason, t in trail:
            if reason == "ClusterLost":
                lost[str(job_id)] = t.timestamp()
            elif str(job_id) in lost:
                self.report.recovery["requeue_to_running"].append(
                    t.timestamp() - lost.pop(str(job_id))
                )

    async def close(self) -> None:
        if self.agents is not None:
            await self.agents.close()
        if self.hubs is not None:
            await self.hubs.close()
        for links in [*self.proxies.values(), list(self.db_links.values())]:
            for proxy in links:
                await proxy.close()
        if self.watch is not None:
            await self.watch.db.close()
        if self.kube is not None:
            await clear_pods(self.kube.cs)
        await self.pg.stop()


def schedule(
    rng: random.Random, faults: int, at_least: Mapping[str, int], kinds: Sequence[str] = FAULTS
) -> list[str]:
    """The kinds of `faults` faults in order: `at_least[kind]` of each kind named (the long
    run's), the rest drawn at random from `kinds`, all shuffled by `rng`."""
    drawn = [kind for kind, n in at_least.items() for _ in range(n)]
    drawn += [rng.choice(kinds) for _ in range(max(0, faults - len(drawn)))]
    rng.shuffle(drawn)
    return drawn


async def run_chaos(
    seed: int, faults: int, at_least: Mapping[str, int] | None = None, kube: Kube | None = None
) -> Report:
    """One seeded run of `faults` faults (at least `at_least[kind]` of the kinds named), with
    the real cluster `kube` beside the simulated ones when given; the report holds any
    violation and the recovery times."""
    kinds = (*FAULTS, *KUBE_FAULTS) if kube else FAULTS
    with tempfile.TemporaryDirectory(prefix="suanpan-chaos-") as tmp:
        chaos = Chaos(seed, Path(tmp), kube)
        stop = asyncio.Event()
        watching: asyncio.Task[None] | None = None
        try:
            api = await chaos.start()
            if chaos.watch is not None:
                watching = asyncio.create_task(chaos.watch.run(stop))
            load_stop = asyncio.Event()
            load = asyncio.create_task(chaos.workload(api, load_stop))
            # without counts each kind is drawn after its wait, so the seeds found replay
            order = schedule(chaos.rng, faults, at_least, kinds) if at_least else None
            for i in range(faults if order is None else len(order)):
                await asyncio.sleep(chaos.rng.uniform(0.5, 4.0))
                await chaos.inject(chaos.rng.choice(kinds) if order is None else order[i])
            load_stop.set()
            await load
            chaos.report.submitted = len(chaos.acked)
            await chaos.check()
        finally:
            stop.set()
            if watching is not None:
                try:
                    await watching
                except Exception as exc:  # reported; it must not mask the run's own error
                    chaos.report.violations.append(f"the pod watch failed: {exc!r}")
            if chaos.watch is not None:
                chaos.report.violations += chaos.watch.violations
                chaos.report.windows = chaos.watch.windows
                chaos.report.pod_samples = chaos.watch.samples
            await chaos.close()
        return chaos.report


@contextlib.asynccontextmanager
async def real_cluster(bin_dir: Path, workdir: Path) -> AsyncIterator[Kube]:
    """One local cluster (the profile's dc-beijing) whose kube-scheduler calls an extender
    process, for the run; everything stopped afterwards."""
    port = free_ports(1)[0]
    env = await up(1, workdir=workdir, extender_url=f"http://127.0.0.1:{port}", bin_dir=bin_dir)
    extender = ExtenderProcess(env.clusters[0].kubeconfig, port, workdir / "extender.log")
    extender.start()
    try:
        yield Kube(env, env.clusters[0])
    finally:
        extender.stop()
        await down(env.workdir)


def figures(reports: Sequence[Report], name: str) -> list[Figure]:
    """A run's figures for the bench report: faults by kind, jobs, violations, recovery times."""
    params = {"seeds": [r.seed for r in reports], "real_cluster": any(r.kube for r in reports)}
    faults: Counter[str] = sum((r.faults for r in reports), Counter())
    recovery: defaultdict[str, list[float]] = defaultdict(list)
    for r in reports:
        for kind, values in r.recovery.items():
            recovery[kind] += values
    windows = [w for r in reports for w in r.windows]
    out = [
        Figure(f"{name}_faults", sum(faults.values()), "faults", True, {**params, **faults}),
        Figure(f"{name}_jobs", sum(r.submitted for r in reports), "jobs", True, params),
        Figure(f"{name}_violations", sum(len(r.violations) for r in reports), "", False, params),
        Figure(f"{name}_fast_double_runs", len(windows), "windows", False, params),
        Figure(f"{name}_fast_double_run_max_s", max(windows, default=0.0), "s", False, params),
    ]
    for kind in sorted({"detection", "takeover", "requeue_to_running", *recovery}):
        values = recovery.get(kind, [])
        counted = {**params, "n": len(values)}
        out += [
            Figure(f"{name}_{kind}_p50_s", percentile(values, 50), "s", False, counted),
            Figure(f"{name}_{kind}_p99_s", percentile(values, 99), "s", False, counted),
        ]
    return out


def section(reports: Sequence[Report], title: str, command: str) -> str:
    """Markdown for bench/report.md: what ran, faults by kind, violations, recovery times."""
    kinds = sorted({k for r in reports for k in r.faults})
    lines = [
        f"### {title}",
        "",
        f"`{command}`",
        "",
        "| seed | real cluster | jobs | " + " | ".join(kinds) + " | violations |",
        "| ---: | --- | ---: | " + " | ".join("---:" for _ in kinds) + " | ---: |",
    ]
    for r in reports:
        counts = " | ".join(str(r.faults[k]) for k in kinds)
        real = "yes" if r.kube else "no"
        lines.append(f"| {r.seed} | {real} | {r.submitted} | {counts} | {len(r.violations)} |")
    lines += ["", "| recovery | n | p50 | p99 |", "| --- | ---: | ---: | ---: |"]
    recovery: defaultdict[str, list[float]] = defaultdict(list)
    for r in reports:
        for kind, values in r.recovery.items():
            recovery[kind] += values
    for kind, values in sorted(recovery.items()):
        p50, p99 = percentile(values, 50), percentile(values, 99)
        lines.append(f"| {kind} | {len(values)} | {p50:.1f} s | {p99:.1f} s |")
    windows = [w for r in reports for w in r.windows]
    lines += [
        "",
        f"Fast jobs' double runs on the real cluster: {len(windows)}, the longest"
        f" {max(windows, default=0.0):.1f} s. Violations:"
        f" {sum(len(r.violations) for r in reports)}.",
        *(f"- {line}" for r in reports for line in r.lines()[1:]),
    ]
    return "\n".join(lines) + "\n"


# make bench's run, the long one of issue 11: seed, faults, and at least this many of a kind
# (about 40 minutes on a shared 2-core machine); `make chaos-long` runs it alone
LONG_RUN = (
    4,
    200,
    {
        "kill_leader": 100,
        "db_restart": 20,
        "partition": 50,
        "freeze_leader": 10,
        "cut_leader_db": 10,
        "stop_apiserver": 10,
        "kill_real_agent": 10,
    },
)


def run() -> list[Figure]:
    """`make bench`'s chaos study: the long run, with a real cluster; its section."""
    seed, faults, at_least = LONG_RUN
    bin_dir = ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="suanpan-chaos-k8s-") as tmp:

        async def go() -> Report:
            async with real_cluster(bin_dir, Path(tmp)) as kube:
                return await run_chaos(seed, faults, at_least, kube=kube)

        report = asyncio.run(go())
    options = " ".join(f"--{kind.replace('_', '-')} {n}" for kind, n in at_least.items())
    command = f"python -m bench.chaos --seed {seed} --faults {faults} {options}"
    (BENCH / "sections").mkdir(exist_ok=True)
    (BENCH / "sections" / "chaos.md").write_text(section([report], "Long run", command))
    return figures([report], "chaos")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.chaos --seed N --faults K`: exit 1 on any violation."""
    p = argparse.ArgumentParser(
        prog="python -m bench.chaos",
        description=__doc__,
        epilog="the long run: make chaos-long, or make bench's chaos study",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--faults", type=int, default=20)
    p.add_argument("--no-kube", action="store_true", help="no real cluster, simulated ones only")
    p.add_argument(
        "--long", action="store_true", help="the long run (make bench's): its seed and faults"
    )
    p.add_argument(
        "--section",
        metavar="NAME",
        help="also write bench/sections/NAME.md and bench/results/NAME_*.json (the long run's)",
    )
    for kind in (*FAULTS, *KUBE_FAULTS):
        p.add_argument(
            f"--{kind.replace('_', '-')}",
            type=int,
            default=0,
            metavar="N",
            help=f"at least N faults {kind}",
        )
    args = p.parse_args(argv)
    at_least = {kind: n for kind in (*FAULTS, *KUBE_FAULTS) if (n := getattr(args, kind))}
    if args.long:
        args.seed, args.faults, at_least = LONG_RUN
    bin_dir = None if args.no_kube else ensure_binaries()

    async def go() -> Report:
        if bin_dir is None:
            return await run_chaos(args.seed, args.faults, at_least)
        with tempfile.TemporaryDirectory(prefix="suanpan-chaos-k8s-") as tmp:
            async with real_cluster(bin_dir, Path(tmp)) as kube:
                return await run_chaos(args.seed, args.faults, at_least, kube)

    report = asyncio.run(go())
    print("\n".join(report.lines()))
    if args.section:
        command = "python -m bench.chaos " + " ".join(sys.argv[1:] if argv is None else argv)
        (BENCH / "sections").mkdir(exist_ok=True)
        (BENCH / "sections" / f"{args.section}.md").write_text(
            section([report], f"Run `{args.section}`", command)
        )
        for figure in figures([report], args.section):
            write_figure(figure)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
