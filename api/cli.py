"""`suanpan`: submit and follow jobs, look at clusters, queues and capacity.

The hub URL and token come from flags, then `SUANPAN_HUB`/`SUANPAN_TOKEN`, then the config
file `~/.config/suanpan/config.yaml` (`hub: URL`, `token: TOKEN`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from api.client import HubClient, HubError

CONFIG = Path("~/.config/suanpan/config.yaml")


def _config(args: argparse.Namespace) -> tuple[str, str | None]:
    path = Path(os.environ.get("SUANPAN_CONFIG", str(CONFIG))).expanduser()
    stored: dict[str, Any] = {}
    if path.exists():
        stored = yaml.safe_load(path.read_text()) or {}
    hub = args.hub or os.environ.get("SUANPAN_HUB") or stored.get("hub") or "http://127.0.0.1:8080"
    token = args.token or os.environ.get("SUANPAN_TOKEN") or stored.get("token")
    return str(hub), token


def table(rows: list[list[Any]], header: list[str]) -> str:
    """Rows as an aligned plain-text table."""
    cells = [header, *[[("" if c is None else str(c)) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def _emit(data: Any, fmt: str, rows: list[list[Any]], header: list[str]) -> None:
    if fmt == "json":
        print(json.dumps(data, indent=2))
    elif fmt == "yaml":
        print(yaml.safe_dump(data, sort_keys=False), end="")
    else:
        print(table(rows, header))


def _job_rows(items: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            j["id"][:8],
            j["name"],
            j["tenant"],
            j["queue"],
            j["priorityClass"],
            j["state"],
            j["cluster"] or "-",
            j["reason"],
        ]
        for j in items
    ]


JOB_HEADER = ["ID", "NAME", "TENANT", "QUEUE", "PRIORITY", "STATE", "CLUSTER", "REASON"]


async def _resolve_job(client: HubClient, ref: str) -> str:
    """A full job id from an id or a unique prefix of one (as shown by `get jobs`)."""
    if len(ref) == 36:
        return ref
    page = await client.request("GET", "/v1/jobs", params={"limit": "500"})
    found = [j["id"] for j in page["items"] if j["id"].startswith(ref)]
    if len(found) != 1:
        raise SystemExit(f"{ref!r} matches {len(found)} jobs; give more of the id")
    return str(found[0])


async def _get(client: HubClient, args: argparse.Namespace) -> None:
    if args.kind in ("job", "jobs"):
        if args.name:
            job = await client.request("GET", f"/v1/jobs/{await _resolve_job(client, args.name)}")
            _emit(job, args.output, _job_rows([job]), JOB_HEADER)
            return
        params = {
            k: v
            for k, v in (("state", args.state), ("queue", args.queue), ("label", args.label))
            if v
        }
        page = await client.request("GET", "/v1/jobs", params={**params, "limit": str(args.limit)})
        _emit(page, args.output, _job_rows(page["items"]), JOB_HEADER)
    elif args.kind in ("cluster", "clusters"):
        path = f"/v1/clusters/{args.name}" if args.name else "/v1/clusters"
        data = await client.request("GET", path)
        items = [data] if args.name else data["items"]
        rows = [
            [
                c["name"],
                c["region"],
                c["state"] + (" (cordoned)" if c["cordoned"] else ""),
                f"{c['readyNodes']}/{c['nodes']}",
                ", ".join(f"{f['flavor']}×{f['total']}" for f in c["flavors"]) or "-",
            ]
            for c in items
        ]
        _emit(data, args.output, rows, ["NAME", "REGION", "STATE", "NODES", "ACCELERATORS"])
    elif args.kind in ("queue", "queues"):
        data = await client.request("GET", "/v1/queues")
        rows = [
            [
                q["tenant"],
                q["name"],
                q["cohort"] or "-",
                q["weight"],
                ", ".join(f"{k}={v}" for k, v in sorted(q["usage"].items())) or "-",
                ", ".join(f"{k}:{v}" for k, v in sorted(q["jobs"].items())) or "-",
            ]
            for q in data["items"]
            if args.name in (None, q["name"])
        ]
        _emit(data, args.output, rows, ["TENANT", "QUEUE", "COHORT", "WEIGHT", "USAGE", "JOBS"])
    else:
        data = await client.request("GET", "/v1/tenants")
        _emit(
            data,
            args.output,
            [[t["name"], t["displayName"]] for t in data["items"]],
            ["NAME", "DISPLAY NAME"],
        )


async def _top(client: HubClient, args: argparse.Namespace) -> None:
    data = await client.request("GET", "/v1/clusters")
    by_flavor: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for c in data["items"]:
        for f in c["flavors"]:
            acc = by_flavor[f["flavor"]]
            acc[0] += f["total"]
            acc[1] += f["healthy"]
            acc[2] += f["allocatedMilli"]
    rows = [
        [
            flavor.split("/")[0],
            flavor.split("/", 1)[1],
            total,
            healthy,
            f"{used / 1000:g}",
            f"{100 * used / 1000 / healthy:.0f}%" if healthy else "-",
        ]
        for flavor, (total, healthy, used) in sorted(by_flavor.items())
    ]
    _emit(data, args.output, rows, ["VENDOR", "MODEL", "DEVICES", "HEALTHY", "ALLOCATED", "USE"])


async def _cluster(client: HubClient, args: argparse.Namespace) -> None:
    """`suanpan cluster bootstrap-token|accept|revoke NAME` (registration, admin only)."""
    if args.action == "bootstrap-token":
        issued = await client.request(
            "POST", f"/v1/clusters/{args.name}/bootstrap-tokens", json={"ttlSeconds": args.ttl}
        )
        print(issued["token"])  # alone on stdout, for `kubectl create secret --from-literal`
        print(f"single use, expires {issued['expiresAt']}", file=sys.stderr)
        return
    found = await client.request("POST", f"/v1/clusters/{args.name}/{args.action}")
    print(f"cluster {found['name']} {found['state']}, accepted: {found['accepted']}")


async def _run(args: argparse.Namespace) -> int:
    hub, token = _config(args)
    async with HubClient(hub, token) as client:
        if args.command == "submit":
            job = await client.submit(args.manifest, args.idempotency_key)
            print(f"job {job['id']} {job['state']}")
        elif args.command == "get":
            await _get(client, args)
        elif args.command == "describe":
            job_id = await _resolve_job(client, args.id)
            job = await client.request("GET", f"/v1/jobs/{job_id}")
            events = await client.request("GET", f"/v1/jobs/{job_id}/events")
            print(
                yaml.safe_dump({k: v for k, v in job.items() if k != "spec"}, sort_keys=False),
                end="",
            )
            print("events:")
            for e in events["items"]:
                print(f"  {e['createdAt'][11:19]}  {e['reason']:<14} {e['message']}")
        elif args.command == "cancel":
            job = await client.request(
                "POST", f"/v1/jobs/{await _resolve_job(client, args.id)}/cancel"
            )
            print(f"job {job['id']} {job['state']}")
        elif args.command == "explain":
            why = await client.request(
                "GET", f"/v1/jobs/{await _resolve_job(client, args.id)}/explain"
            )
            if args.output != "table":
                _emit(why, args.output, [], [])
            else:
                print(why["summary"])
                for c in why["clusters"]:
                    print(f"  {c['cluster']}: {c['reason']}")
        elif args.command == "top":
            await _top(client, args)
        elif args.command == "cluster":
            await _cluster(client, args)
    return 0


def parser() -> argparse.ArgumentParser:
    """The argument parser of `suanpan`."""
    p = argparse.ArgumentParser(prog="suanpan", description=__doc__.splitlines()[0])
    p.add_argument(
        "--hub",
        help="hub URL, or several separated by commas (default $SUANPAN_HUB or the config file)",
    )
    p.add_argument("--token", help="API token (default $SUANPAN_TOKEN or the config file)")
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit", help="submit a job manifest")
    s.add_argument("-f", "--file", required=True, help="YAML or JSON manifest, - for stdin")
    s.add_argument("--idempotency-key", help="retry-safe key: the same key submits once")
    g = sub.add_parser("get", parents=[out], help="list jobs, clusters, queues or tenants")
    g.add_argument(
        "kind", choices=("jobs", "job", "clusters", "cluster", "queues", "queue", "tenants")
    )
    g.add_argument("name", nargs="?")
    g.add_argument("--state", help="comma-separated job states")
    g.add_argument("--queue")
    g.add_argument("--label", help="k=v[,k=v]")
    g.add_argument("--limit", type=int, default=50)
    for name, text in (("describe", "a job with its events"), ("cancel", "cancel a job")):
        c = sub.add_parser(name, help=text)
        c.add_argument("kind", choices=("job",))
        c.add_argument("id")
    e = sub.add_parser("explain", parents=[out], help="why a job waits, per cluster")
    e.add_argument("id")
    sub.add_parser("top", parents=[out], help="capacity and use by vendor and model")
    r = sub.add_parser("cluster", help="register a cluster: bootstrap-token, accept, revoke")
    r.add_argument("action", choices=("bootstrap-token", "accept", "revoke"))
    r.add_argument("name")
    r.add_argument("--ttl", type=int, default=3600, help="bootstrap token lifetime in seconds")
    sub.add_parser(
        "sim", help="replay a trace through the scheduler (see `suanpan sim -h`)", add_help=False
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `suanpan`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        from federation.simulation.cli import main as sim_main

        return sim_main(argv[1:])
    args = parser().parse_args(argv)
    if args.command == "submit":
        args.manifest = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    try:
        return asyncio.run(_run(args))
    except HubError as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cannot reach the hub: {exc}", file=sys.stderr)
        return 1
