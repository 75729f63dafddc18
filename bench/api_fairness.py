"""API fairness: one tenant floods submissions while another submits at a modest rate.

A real `suanpan-hub serve` process (API only) on an embedded PostgreSQL; the calm tenant sends
`CALM_RATE` submissions a second, first alone, then during a flood of `FLOOD_CLIENTS` clients
of the other tenant that send as fast as they can and ignore `Retry-After`. The flood runs
once against the default rate limits and once against a hub with them off. Reported: the calm
tenant's p50/p99 latency in each phase, and how much of the flood was admitted. The flood
runs in a process of its own (`python -m bench.api_fairness URL TOKEN SECONDS`).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass

import aiohttp

from bench.api_throughput import (
    ADMIN,
    UNLIMITED,
    config_file,
    manifest,
    member_token,
    start_hubs,
)
from bench.results import Figure
from federation.store import migrate
from federation.store.embedded import EmbeddedPostgres

CALM_RATE = 10.0  # submissions per second
FLOOD_CLIENTS = 32
DURATION_S = 10.0


@dataclass
class Phase:
    """What one phase measured."""

    calm_ms: list[float]
    flood_admitted: int = 0
    flood_refused: int = 0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.calm_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def _calm(url: str, token: str, stop: float) -> list[float]:
    """Submit at `CALM_RATE` until `stop`; each submission's latency in ms."""
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        i = 0
        while time.perf_counter() < stop:
            i += 1
            start = time.perf_counter()
            async with session.post(url + "/v1/jobs", json=manifest(i)) as resp:
                await resp.read()
                if resp.status != 201:
                    raise RuntimeError(f"calm submission refused: {resp.status}")
            latencies.append(1000 * (time.perf_counter() - start))
            await asyncio.sleep(max(0.0, start + 1 / CALM_RATE - time.perf_counter()))
    return latencies


async def _flood(url: str, token: str, seconds: float) -> tuple[int, int]:
    """`FLOOD_CLIENTS` clients submitting back to back for `seconds`; how many submissions
    were admitted and how many refused."""
    stop = time.perf_counter() + seconds
    counts = [0, 0]
    connector = aiohttp.TCPConnector(limit=FLOOD_CLIENTS)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def client(k: int) -> None:
            i = 0
            while time.perf_counter() < stop:
                i += 1
                async with session.post(url + "/v1/jobs", json=manifest(k * 10**6 + i)) as resp:
                    await resp.read()
                    counts[resp.status != 201] += 1

        await asyncio.gather(*(client(k) for k in range(FLOOD_CLIENTS)))
    return counts[0], counts[1]


async def _phase(url: str, calm: str, flood: str | None) -> Phase:
    """The calm tenant's latencies, during a flood (in its own process, so that the flood's
    clients do not delay the calm one's) when `flood` names the flooding tenant's token."""
    proc = None
    if flood is not None:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "bench.api_fairness", url, flood, str(DURATION_S)),
            stdout=asyncio.subprocess.PIPE,
        )
    phase = Phase(await _calm(url, calm, time.perf_counter() + DURATION_S))
    if proc is not None:
        out, _ = await proc.communicate()
        phase.flood_admitted, phase.flood_refused = json.loads(out)
    return phase


async def _hub_phases(db_url: str, config_text: str, prefix: str) -> dict[str, Phase]:
    """The quiet and flooded phases against one hub configured by `config_text`."""
    with config_file(config_text) as config:
        url, procs = await start_hubs(db_url, 1, config)
    try:
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN}"}) as s:
            calm = await member_token(s, url, f"{prefix}-calm")
            flood = await member_token(s, url, f"{prefix}-flood")
        return {"quiet": await _phase(url, calm, None), "flood": await _phase(url, calm, flood)}
    finally:
        for p in procs:
            p.terminate()
            await p.wait()


async def _study() -> list[Figure]:
    pg = EmbeddedPostgres()
    db_url = await pg.start()
    try:
        await migrate.upgrade(db_url)
        limited = await _hub_phases(db_url, "", "limited")
        unlimited = await _hub_phases(db_url, UNLIMITED, "unlimited")
    finally:
        await pg.stop()
    phases = {
        "quiet": limited["quiet"],
        "flood_limited": limited["flood"],
        "flood_unlimited": unlimited["flood"],
    }
    params = {"calm_rate": CALM_RATE, "flood_clients": FLOOD_CLIENTS, "duration_s": DURATION_S}
    figures = []
    for name, phase in phases.items():
        p50, p99 = statistics.median(phase.calm_ms), phase.percentile(0.99)
        admitted = phase.flood_admitted / DURATION_S
        print(
            f"{name:16s} calm p50 {p50:6.1f} ms  p99 {p99:6.1f} ms"
            f"  flood admitted {admitted:6.0f}/s, refused {phase.flood_refused / DURATION_S:6.0f}/s"
        )
        figures += [
            Figure(f"api_fairness_calm_p50_ms_{name}", p50, "ms", False, params),
            Figure(f"api_fairness_calm_p99_ms_{name}", p99, "ms", False, params),
        ]
        if phase.flood_admitted or phase.flood_refused:
            figures.append(
                Figure(f"api_fairness_flood_admitted_per_s_{name}", admitted, "jobs/s", False)
            )
    return figures


def run() -> list[Figure]:
    """Measure the calm tenant's latency with and without a flood from another tenant."""
    return asyncio.run(_study())


if __name__ == "__main__":
    if len(sys.argv) == 4:  # the flood of one phase: URL TOKEN SECONDS
        print(json.dumps(asyncio.run(_flood(sys.argv[1], sys.argv[2], float(sys.argv[3])))))
    else:
        run()
