"""`suanpan-extender`: the kube-scheduler extender of one member cluster.

Serves filter / prioritize / bind on `--listen` and keeps a node and pod cache with list+watch
(credentials from `--kubeconfig`, else in-cluster). `--print-scheduler-config` prints the
KubeSchedulerConfiguration for the catalog instead and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence

import uvloop
from aiohttp import web

from cluster_agents.extender.cache import Cache
from cluster_agents.extender.config import DEFAULT_URL, render, scheduler_config
from cluster_agents.extender.kube import KubePods, keep_synced, reflectors
from cluster_agents.extender.metrics import Metrics
from cluster_agents.extender.scoring import POLICIES
from cluster_agents.extender.server import make_app
from cluster_agents.extender.service import FILTER_KEEPS, FILTER_KEEPS_BEST, Extender
from cluster_agents.kube.client import connect
from cluster_agents.kube.metrics import BackendMetrics
from federation.catalog import Catalog, load_catalog

log = logging.getLogger("suanpan.extender")


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="suanpan-extender", description=__doc__)
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster credentials)")
    parser.add_argument("--listen", default="127.0.0.1:8888", help="HOST:PORT to serve on")
    parser.add_argument("--policy", choices=POLICIES, default="suanpan", help="node scoring")
    parser.add_argument(
        "--gang-wait",
        type=float,
        default=20.0,
        help="seconds a gang member's bind waits for the rest of its gang; keep it below "
        "kube-scheduler's extender httpTimeout (30 s in the generated config)",
    )
    parser.add_argument(
        "--filter-keeps",
        choices=FILTER_KEEPS,
        default=FILTER_KEEPS_BEST,
        help="best: filter keeps only the node the pod goes to (hub's hint, else the policy's "
        "best), so kube-scheduler neither scores nor calls prioritize; all: every fitting "
        "node, scored by kube-scheduler's plugins plus prioritize",
    )
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--print-scheduler-config",
        action="store_true",
        help="print the KubeSchedulerConfiguration for the catalog and exit",
    )
    parser.add_argument("--url", default=DEFAULT_URL, help="urlPrefix of the printed config")
    return parser.parse_args(argv)


async def serve(
    catalog: Catalog,
    kubeconfig: str | None,
    host: str,
    port: int,
    policy: str,
    gang_wait_s: float = 20.0,
    filter_keeps: str = FILTER_KEEPS_BEST,
) -> None:
    """Run the extender until SIGTERM or SIGINT."""
    from kubernetes_asyncio import client

    api = await connect(kubeconfig)
    async with api:
        core = client.CoreV1Api(api)
        cache = Cache(catalog)
        metrics = Metrics()
        kube_metrics = BackendMetrics(metrics.registry)
        pods = KubePods(core, kube_metrics)
        watches = reflectors(core, cache, kube_metrics)
        extender = Extender(
            cache,
            pods,
            policy,
            metrics,
            gang_wait_s=gang_wait_s,
            watches=watches,
            filter_keeps=filter_keeps,
        )
        watching = asyncio.create_task(keep_synced(watches))
        runner = web.AppRunner(make_app(extender), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        log.info(
            "suanpan-extender on %s:%d, policy %s, filter keeps %s",
            host,
            port,
            policy,
            filter_keeps,
        )
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await stop.wait()
        await runner.cleanup()
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `suanpan-extender` console script."""
    args = _arguments(argv)
    catalog = load_catalog()
    if args.print_scheduler_config:
        sys.stdout.write(render(scheduler_config(catalog, url=args.url)))
        return 0
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s")
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        print(f"suanpan-extender: --listen needs HOST:PORT, got {args.listen!r}", file=sys.stderr)
        return 2
    uvloop.run(
        serve(
            catalog,
            args.kubeconfig,
            host,
            int(port),
            args.policy,
            args.gang_wait,
            args.filter_keeps,
        )
    )
    return 0
