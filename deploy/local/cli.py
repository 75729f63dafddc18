"""`suanpan-dev clusters up|down|status`: local real Kubernetes clusters for development."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
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
    cl.add_argument(
        "--extender-url",
        action="append",
        default=[],
        metavar="[CLUSTER=]URL",
        help="scheduler extender urlPrefix: one URL for every cluster ({cluster} is replaced by"
        " the cluster's name), or CLUSTER=URL once per cluster (repeatable; clusters without"
        " one run without extender)",
    )
    cl.add_argument("--bin-dir", type=Path, default=None, help="prebuilt binaries (skip build)")
    cl.add_argument("--timeout", type=float, default=120.0, help="seconds per wait (default 120)")
    return parser


def _print_health(health: Sequence[clusters.ClusterHealth]) -> None:
    for h in health:
        print(f"{h.name}: {'healthy' if h.healthy else 'UNHEALTHY'}")
        for comp, state in h.components.items():
            print(f"  {comp:<24} {state}")
        print(f"  {'unready nodes':<24} {', '.join(h.unready_nodes) or 'none'}")


_PER_CLUSTER = re.compile(r"(?P<cluster>[a-z0-9]([-a-z0-9]*[a-z0-9])?)=(?P<url>.+)")


def extender_urls(values: Sequence[str]) -> str | Mapping[str, str] | None:
    """`--extender-url` values as `clusters.up` takes them: None, one URL, or one per cluster."""
    if not values:
        return None
    pairs = [_PER_CLUSTER.fullmatch(v) for v in values]
    if len(values) == 1 and pairs[0] is None:
        return values[0]
    if any(p is None for p in pairs):
        raise ValueError("give one --extender-url URL for all clusters, or CLUSTER=URL for each")
    urls = {p["cluster"]: p["url"] for p in pairs if p is not None}
    if len(urls) != len(values):
        raise ValueError("a cluster is given more than one --extender-url")
    return urls


def _up(args: argparse.Namespace, workdir: Path) -> int:
    try:
        extender = extender_urls(args.extender_url)
    except ValueError as exc:
        print(f"suanpan-dev: {exc}", file=sys.stderr)
        return 2
    try:
        bin_dir = ensure_binaries(args.bin_dir)
        env = asyncio.run(
            clusters.up(
                args.clusters,
                args.profile,
                workdir,
                extender,
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
