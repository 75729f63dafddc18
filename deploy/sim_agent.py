"""The real agent over a simulated cluster from a node profile, as its own process.

`python -m deploy.sim_agent --simulated PROFILE --hub URL --cluster NAME ...` takes the agent's
own flags (`suanpan-agent --help`) plus the profile and time scale; benchmarks use it to
measure the agent as users run it, without a Kubernetes control plane.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry

from cluster_agents.agent import cli
from cluster_agents.agent.backend import ClusterBackend
from cluster_agents.backends.simulated import SimNodeSpec, SimulatedCluster
from deploy.local.profile import load_profile
from federation.catalog import Catalog


def simulated_backend(
    args: argparse.Namespace, catalog: Catalog, registry: CollectorRegistry
) -> ClusterBackend:
    """The cluster `args.cluster` of the profile `args.simulated`, simulated."""
    del registry  # the simulated cluster exports no metrics of its own
    profile = {c.name: c for c in load_profile(Path(args.simulated)).clusters}
    if args.cluster not in profile:
        raise SystemExit(f"cluster {args.cluster!r} is not in {args.simulated}")
    nodes = [
        SimNodeSpec(n.name, n.labels, n.capacity, n.annotations)
        for n in profile[args.cluster].nodes
    ]
    block = zlib.crc32(args.cluster.encode())  # pod addresses apart from other clusters'
    return SimulatedCluster(catalog, nodes, time_scale=args.time_scale, pod_block=block)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    p = cli.parser("python -m deploy.sim_agent")
    p.add_argument("--simulated", metavar="PROFILE", required=True, help="node profile (YAML)")
    p.add_argument("--time-scale", type=float, default=1.0, help="simulated seconds per second")
    return cli.run(p.parse_args(argv), simulated_backend)


if __name__ == "__main__":
    sys.exit(main())
