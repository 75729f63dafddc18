"""`suanpan-dev clusters up|down|status`: local real Kubernetes clusters for development."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from deploy.local import clusters
from deploy.local.binaries import BuildError, ensure_binaries
from deploy.local.profile import DEFAULT_PROFILE, ProfileError


def default_workdir() -> Path:
    """Where `suanpan-dev clusters` keeps its state when --workdir is not given."""
    return Path(tempfile.gettempdir()) / f"suanpan-dev-{os.getuid()}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="suanpan-dev", description=__doc__)
    groups = parser.add_subparsers(dest="group", required=True)
    cl = groups.add_parser("clusters", help="local multi-cluster Kubernetes")
    cl.add_argument("action", choices=("up", "down", "status"))
    cl.add_argument("--clusters", type=int, default=2, help="number of clusters (default 2)")
    cl.add_argument("--profile", type=Path, default=DEFAULT_PROFILE, help="node profile YAML")
    cl.add_argument("--workdir", type=Path, default=None, help="state dir (default: %(default)s)")
    cl.add_argument("--extender-url", default=None, help="scheduler extender urlPrefix")
    cl.add_argument("--bin-dir", type=Path, default=None, help="prebuilt binaries (skip build)")
    cl.add_argument("--timeout", type=float, default=120.0, help="seconds per wait (default 120)")
    return parser


def _print_health(health: Sequence[clusters.ClusterHealth]) -> None:
    for h in health:
        print(f"{h.name}: {'healthy' if h.healthy else 'UNHEALTHY'}")
        for comp, state in h.components.items():
            print(f"  {comp:<24} {state}")
        print(f"  {'unready nodes':<24} {', '.join(h.unready_nodes) or 'none'}")


def _up(args: argparse.Namespace, workdir: Path) -> int:
    try:
        bin_dir = ensure_binaries(args.bin_dir)
        env = asyncio.run(
            clusters.up(
                args.clusters,
                args.profile,
                workdir,
                args.extender_url,
                bin_dir=bin_dir,
                timeout_s=args.timeout,
                keep_on_failure=True,
            )
        )
    except (BuildError, ProfileError, clusters.ClustersError) as exc:
        print(f"suanpan-dev: {exc}", file=sys.stderr)
        return 1
    print(f"{len(env.clusters)} cluster(s) ready in {env.ready_seconds} s; state: {env.state_file}")
    for cs in env.clusters:
        print(f"  {cs.name:<14} {cs.apiserver_url}  kubeconfig={cs.kubeconfig}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    args = _parser().parse_args(argv)
    workdir: Path = (args.workdir or default_workdir()).resolve()
    if args.action == "up":
        return _up(args, workdir)
    if args.action == "down":
        for note in asyncio.run(clusters.down(workdir)):
            print(note)
        return 0
    health = asyncio.run(clusters.status(workdir))
    if health is None:
        print(f"no clusters recorded in {workdir}")
        return 1
    _print_health(health)
    return 0 if all(h.healthy for h in health) else 1


if __name__ == "__main__":
    sys.exit(main())
