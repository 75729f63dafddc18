"""`suanpan-discovery`: the node discovery DaemonSet program.

Runs the vendor tools every `--interval` seconds and keeps the node's
`suanpan.io/accelerator.*` labels current (node name from `--node-name` or $NODE_NAME,
in-cluster Kubernetes credentials). `--dry-run` prints the labels once and touches nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence

from cluster_agents.discovery.kube import NodeLabels
from cluster_agents.discovery.loop import DiscoveryLoop, discover
from cluster_agents.discovery.node_labels import compute_labels
from cluster_agents.discovery.runner import ToolFailed, run_tool
from federation.catalog import load_catalog


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="suanpan-discovery", description=__doc__)
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between rounds")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a tool may take")
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""))
    parser.add_argument("--once", action="store_true", help="run one round and exit")
    parser.add_argument("--dry-run", action="store_true", help="print labels, patch nothing")
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


async def _run(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    if args.dry_run:
        try:
            devices = await discover(run_tool, time_limit=args.timeout)
        except ToolFailed as exc:
            print(f"suanpan-discovery: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(compute_labels(devices, catalog), indent=2, sort_keys=True))
        return 0
    from kubernetes_asyncio import client, config

    config.load_incluster_config()  # type: ignore[no-untyped-call]
    async with client.ApiClient() as api:
        node = NodeLabels(client.CoreV1Api(api), args.node_name)
        loop = DiscoveryLoop(catalog, run_tool, node.read, node.patch, time_limit=args.timeout)
        if args.once:
            await loop.run_once()
            return 0
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await loop.run_forever(args.interval, stop)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `suanpan-discovery` console script."""
    args = _arguments(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s")
    if not args.dry_run and not args.node_name:
        print("suanpan-discovery: --node-name or $NODE_NAME is required", file=sys.stderr)
        return 2
    return asyncio.run(_run(args))
