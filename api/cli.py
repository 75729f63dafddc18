"""`suanpan`: submit and follow jobs, run services, look at clusters, queues and capacity.

The hub URL and token come from flags, then `SUANPAN_HUB`/`SUANPAN_TOKEN`, then the config
file `~/.config/suanpan/config.yaml` (`hub: URL`, `token: TOKEN`). The token is an API token
or, where the hub accepts an OpenID Connect provider, that provider's ID or access token
(a JWT), e.g. `SUANPAN_TOKEN=$(oidc-token ml)`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from api.cli_output import emit, indented
from api.client import HubClient, HubError
from api.service_cli import (
    apply,
    delete_service,
    describe_service,
    get_endpoints,
    get_services,
)
from federation.imports import annotated
from federation.tls_client import client_context

CONFIG = Path("~/.config/suanpan/config.yaml")


def _config(args: argparse.Namespace) -> tuple[str, str | None]:
    path = Path(os.environ.get("SUANPAN_CONFIG", str(CONFIG))).expanduser()
    stored: dict[str, Any] = {}
    if path.exists():
        stored = yaml.safe_load(path.read_text()) or {}
    hub = args.hub or os.environ.get("SUANPAN_HUB") or stored.get("hub") or "http://127.0.0.1:8080"
    token = args.token or os.environ.get("SUANPAN_TOKEN") or stored.get("token")
    return str(hub), token


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
    if args.kind in ("service", "services"):
        await get_services(client, args)
    elif args.kind == "endpoints":
        await get_endpoints(client, args)
    elif args.kind in ("job", "jobs"):
        if args.name:
            job = await client.request("GET", f"/v1/jobs/{await _resolve_job(client, args.name)}")
            emit(job, args.output, _job_rows([job]), JOB_HEADER)
            return
        filters = ("state", "queue", "label", "vendor", "cluster")
        params = {k: getattr(args, k) for k in filters if getattr(args, k)}
        page = await client.request("GET", "/v1/jobs", params={**params, "limit": str(args.limit)})
        emit(page, args.output, _job_rows(page["items"]), JOB_HEADER)
    elif args.kind in ("cluster", "clusters"):
        path = f"/v1/clusters/{args.name}" if args.name else "/v1/clusters"
        data = await client.request("GET", path)
        items = [data] if args.name else data["items"]
        rows = [
            [
                c["name"],
                c["region"],
                c["state"]
                + (" (cordoned)" if c["cordoned"] else "")
                + ("" if c["accepted"] else " (not accepted)"),
                f"{c['readyNodes']}/{c['nodes']}",
                ", ".join(f"{f['flavor']}×{f['total']}" for f in c["flavors"]) or "-",
            ]
            for c in items
        ]
        emit(data, args.output, rows, ["NAME", "REGION", "STATE", "NODES", "ACCELERATORS"])
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
        emit(data, args.output, rows, ["TENANT", "QUEUE", "COHORT", "WEIGHT", "USAGE", "JOBS"])
    else:
        data = await client.request("GET", "/v1/tenants")
        emit(
            data,
            args.output,
            [[t["name"], t["displayName"]] for t in data["items"]],
            ["NAME", "DISPLAY NAME"],
        )


TOP_KEYS = {
    "cluster": ("cluster", "vendor", "model"),
    "vendor": ("vendor", "model"),
    "node": ("cluster", "node", "vendor", "model"),
}
TOP_COLUMNS = ["DEVICES", "ALLOCATED", "UNHEALTHY", "REPORTING", "UTIL", "MEM-USED", "TEMP-MAX"]


def top_rows(devices: list[dict[str, Any]], by: str) -> tuple[list[list[Any]], list[str]]:
    """`GET /v1/telemetry`'s devices summed per group (`TOP_KEYS[by]`): devices, allocated
    devices, unhealthy ones, those with a reading, their mean utilization, memory used and
    the hottest."""
    keys = TOP_KEYS[by]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for d in devices:
        vendor, model = d["flavor"].split("/", 1)
        values = {**d, "vendor": vendor, "model": model}
        groups[tuple(values[k] for k in keys)].append(d)
    rows = []
    for group, found in sorted(groups.items()):
        read = [d for d in found if d["utilization"] is not None]
        memory = [d["memoryUsedMib"] for d in found if d["memoryUsedMib"] is not None]
        temps = [d["temperatureC"] for d in found if d["temperatureC"] is not None]
        rows.append(
            [
                *group,
                len(found),
                f"{sum(d['allocatedMilli'] for d in found) / 1000:g}",
                sum(1 for d in found if not d["healthy"]),
                len(read),
                f"{sum(d['utilization'] for d in read) / len(read):.0f}%" if read else "-",
                f"{sum(memory) / 1024:.0f} GiB" if memory else "-",
                f"{max(temps):g}C" if temps else "-",
            ]
        )
    return rows, [k.upper() for k in keys] + TOP_COLUMNS


async def _top(client: HubClient, args: argparse.Namespace) -> None:
    params = {k: v for k, v in (("cluster", args.cluster), ("vendor", args.vendor)) if v}
    data = await client.request("GET", "/v1/telemetry", params=params)
    rows, header = top_rows(data["items"], args.by)
    emit(data, args.output, rows, header)


TTL_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> int:
    """Seconds of a duration like `3600`, `90s`, `15m`, `12h` or `30d`."""
    number, unit = (text[:-1], text[-1]) if text[-1:] in TTL_UNITS else (text, "s")
    if not (number.isascii() and number.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 3600, 15m, 12h, 30d")
    return int(number) * TTL_UNITS[unit]


def _given(body: dict[str, Any]) -> dict[str, Any]:
    """The fields given (the hub's defaults apply to the others)."""
    return {k: v for k, v in body.items() if v is not None}


def _token_rows(items: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [t["id"], t["name"], t["role"], t.get("expiresAt") or "never", t.get("revokedAt") or "-"]
        for t in items
    ]


TOKEN_HEADER = ["ID", "NAME", "ROLE", "EXPIRES", "REVOKED"]


async def _token(client: HubClient, args: argparse.Namespace) -> None:
    """`suanpan token create|list|rotate|revoke` (admin)."""
    if args.action == "create":
        body = {"name": args.name, "role": args.role, "tenant": args.tenant}
        body |= {"cluster": args.cluster, "ttlSeconds": args.ttl}
        made = await client.request("POST", "/v1/tokens", json=_given(body))
    elif args.action == "rotate":
        body = {"ttlSeconds": args.ttl, "overlapSeconds": args.overlap}
        made = await client.request("POST", f"/v1/tokens/{args.id}/rotate", json=_given(body))
    elif args.action == "revoke":
        await client.request("DELETE", f"/v1/tokens/{args.id}")
        print(f"token {args.id} revoked")
        return
    else:
        page = await client.request("GET", "/v1/tokens")
        emit(page, args.output, _token_rows(page["items"]), TOKEN_HEADER)
        return
    if args.output != "table":
        emit(made, args.output, [], [])
    else:
        print(f"token {made['id']} expires {made['expiresAt']} (secret shown once):")
        print(made["token"])


def _token_parser(sub: Any, out: argparse.ArgumentParser) -> None:
    t = sub.add_parser("token", help="issue, list, rotate and revoke API tokens (admin)")
    actions = t.add_subparsers(dest="action", required=True)
    ttl = argparse.ArgumentParser(add_help=False)
    ttl.add_argument(
        "--ttl",
        type=duration,
        help="lifetime, e.g. 12h or 30d (default: 90d; when rotating, the old token's)",
    )
    c = actions.add_parser("create", parents=[out, ttl], help="issue a token")
    c.add_argument("name")
    c.add_argument("--role", choices=("admin", "member", "viewer", "agent"), required=True)
    c.add_argument("--tenant", help="required for role member")
    c.add_argument("--cluster", help="required for role agent")
    actions.add_parser("list", parents=[out], help="issued tokens, never their secrets")
    r = actions.add_parser(
        "rotate", parents=[out, ttl], help="issue a successor; the old one works until revoked"
    )
    r.add_argument("id")
    r.add_argument(
        "--overlap", type=duration, help="the old token expires this long after rotation"
    )
    actions.add_parser("revoke", help="revoke a token at once").add_argument("id")


AUDIT_FILTERS = ("actor", "tenant", "action", "outcome", "since", "until")
AUDIT_HEADER = ["TIME", "ACTOR", "TENANT", "ACTION", "OBJECT", "STATUS", "SOURCE", "REQUEST"]


async def _audit(client: HubClient, args: argparse.Namespace) -> None:
    """The audit trail, newest first, following cursors up to `--limit` records."""
    params = {k: getattr(args, k) for k in AUDIT_FILTERS if getattr(args, k)}
    items: list[dict[str, Any]] = []
    cursor = None
    while len(items) < args.limit:
        page_params = {**params, "limit": str(min(1000, args.limit - len(items)))}
        if cursor:
            page_params["cursor"] = cursor
        page = await client.request("GET", "/v1/audit", params=page_params)
        items += page["items"]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    fields = ("actor", "tenant", "action", "object", "status", "source", "requestId")
    rows = [[r["at"][:19], *(r[f] if r[f] is not None else "-" for f in fields)] for r in items]
    emit({"items": items}, args.output, rows, AUDIT_HEADER)


async def _logs(client: HubClient, args: argparse.Namespace) -> None:
    """Write a replica's container log to stdout as it arrives."""
    given = (("task", args.task), ("replica", args.replica), ("container", args.container))
    params = {k: str(v) for k, v in given if v is not None}
    params["follow"] = "true" if args.follow else "false"
    if args.tail is not None:
        params["tail"] = str(args.tail)
    path = f"/v1/jobs/{await _resolve_job(client, args.id)}/logs"
    async for chunk in client.stream(path, params):
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()


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


REPLICA_HEADER = [
    "TASK",
    "REPLICA",
    "ATTEMPT",
    "POD",
    "NODE",
    "PHASE",
    "EXIT",
    "REASON",
    "RESTARTS",
]


def _replica_row(
    task: Any, replica: Any, phase: str, restarts: Any, r: dict[str, Any]
) -> list[Any]:
    code = r["exitCode"] if r["exitCode"] is not None else "-"
    node, reason = r["node"] or "-", r["reason"] or "-"
    return [task, replica, r["attempt"], r["pod"], node, phase, code, reason, restarts]


def replica_rows(replicas: list[dict[str, Any]]) -> list[list[Any]]:
    """A replica table's rows; a replica run again after a failure gets a line for that."""
    rows: list[list[Any]] = []
    for r in replicas:
        rows.append(_replica_row(r["task"], r["replica"], r["phase"], r["restarts"], r))
        if (last := r["lastFailure"]) is not None:
            rows.append(_replica_row("", "", "Failed", "", last))
    return rows


async def _describe(client: HubClient, args: argparse.Namespace) -> None:
    """A job (without its manifest), its elastic tasks' sizes and its replicas as tables,
    then its events."""
    job_id = await _resolve_job(client, args.id)
    job = await client.request("GET", f"/v1/jobs/{job_id}")
    events = await client.request("GET", f"/v1/jobs/{job_id}/events")
    shown = {k: v for k, v in job.items() if k not in ("spec", "replicas", "elastic")}
    print(yaml.safe_dump(shown, sort_keys=False), end="")
    if job.get("elastic"):
        print("elastic:")
        rows = [
            [e["task"], e["replicas"], e["minReplicas"], e["maxReplicas"]] for e in job["elastic"]
        ]
        indented(rows, ["TASK", "REPLICAS", "MIN", "MAX"])
    if job["replicas"]:
        print("replicas:")
        indented(replica_rows(job["replicas"]), REPLICA_HEADER)
    print("events:")
    for e in events["items"]:
        print(f"  {e['createdAt'][11:19]}  {e['reason']:<14} {e['message']}")


async def _run(args: argparse.Namespace) -> int:
    hub, token = _config(args)
    ca = args.hub_ca or os.environ.get("SUANPAN_HUB_CA")
    async with HubClient(hub, token, tls=client_context(Path(ca) if ca else None)) as client:
        if args.command == "submit":
            job = await client.submit(args.manifest, args.idempotency_key)
            print(f"job {job['id']} {job['state']}")
        elif args.command == "apply":
            await apply(client, args.manifest, args.idempotency_key)
        elif args.command == "describe" and args.kind == "service":
            await describe_service(client, args.id)
        elif args.command == "get":
            await _get(client, args)
        elif args.command == "describe":
            await _describe(client, args)
        elif args.command == "delete":
            await delete_service(client, args.name)
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
                emit(why, args.output, [], [])
            else:
                print(why["summary"])
                for c in why["clusters"]:
                    print(f"  {c['cluster']}: {c['reason']}")
        elif args.command == "top":
            await _top(client, args)
        elif args.command == "token":
            await _token(client, args)
        elif args.command == "audit":
            await _audit(client, args)
        elif args.command == "logs":
            await _logs(client, args)
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
    p.add_argument("--hub-ca", help="CA bundle verifying an https hub (default $SUANPAN_HUB_CA)")
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit", help="submit a job manifest")
    s.add_argument("-f", "--file", required=True, help="YAML or JSON manifest, - for stdin")
    s.add_argument("--idempotency-key", help="retry-safe key: the same key submits once")
    _import_flags(s)
    ap = sub.add_parser("apply", help="create or update a service from its manifest")
    ap.add_argument("-f", "--file", required=True, help="YAML or JSON manifest, - for stdin")
    ap.add_argument("--idempotency-key", help="retry-safe key of a creation")
    g = sub.add_parser(
        "get", parents=[out], help="list jobs, services, endpoints, clusters, queues or tenants"
    )
    g.add_argument(
        "kind",
        choices=(
            *("jobs", "job", "services", "service", "endpoints"),
            *("clusters", "cluster", "queues", "queue", "tenants"),
        ),
    )
    g.add_argument("name", nargs="?", help="one of them (endpoints: the service's)")
    g.add_argument("--state", help="comma-separated job states")
    g.add_argument("--queue")
    g.add_argument("--label", help="k=v[,k=v]")
    g.add_argument("--vendor", help="jobs that accept this vendor's devices")
    g.add_argument("--cluster", help="jobs placed on this cluster")
    g.add_argument("--limit", type=int, default=50)
    for name, text, kinds in (
        ("describe", "a job or a service with its events", ("job", "service")),
        ("cancel", "cancel a job", ("job",)),
    ):
        c = sub.add_parser(name, help=text)
        c.add_argument("kind", choices=kinds)
        c.add_argument("id", help="a job's id (or a prefix), a service's name")
    d = sub.add_parser("delete", help="delete a service (its pods are removed)")
    d.add_argument("kind", choices=("service",))
    d.add_argument("name")
    e = sub.add_parser("explain", parents=[out], help="why a job waits, per cluster")
    e.add_argument("id")
    t = sub.add_parser(
        "top", parents=[out], help="devices, allocation, health and live utilization"
    )
    t.add_argument("--by", choices=sorted(TOP_KEYS), default="cluster", help="group rows by")
    t.add_argument("--cluster", help="one cluster only")
    t.add_argument("--vendor", help="one vendor only (nvidia, huawei, ...)")
    _token_parser(sub, out)
    a = sub.add_parser("audit", parents=[out], help="who did what: the audit trail, newest first")
    a.add_argument("--actor", help="a token id")
    a.add_argument("--tenant")
    a.add_argument("--action", help="method and operation, e.g. 'POST submit_job'")
    a.add_argument("--outcome", help="a status code (403) or class (4xx)")
    a.add_argument("--since", help="RFC 3339 time, e.g. 2026-12-01T00:00:00Z")
    a.add_argument("--until", help="RFC 3339 time")
    a.add_argument("--limit", type=int, default=100)
    lg = sub.add_parser("logs", help="a replica's container log, streamed from its cluster")
    lg.add_argument("id")
    lg.add_argument("--task", help="the job's task (default: its first)")
    lg.add_argument("--replica", type=int, help="replica index (default 0)")
    lg.add_argument("--container", help="container of the pod (default: its first)")
    lg.add_argument("-f", "--follow", action="store_true", help="stream until the container ends")
    lg.add_argument("--tail", type=int, help="only the last N lines")
    r = sub.add_parser("cluster", help="register a cluster: bootstrap-token, accept, revoke")
    r.add_argument("action", choices=("bootstrap-token", "accept", "revoke"))
    r.add_argument("name")
    r.add_argument("--ttl", type=int, default=3600, help="bootstrap token lifetime in seconds")
    sub.add_parser(
        "sim", help="replay a trace through the scheduler (see `suanpan sim -h`)", add_help=False
    )
    return p


def _import_flags(s: argparse.ArgumentParser) -> None:
    """Flags that set the import annotations of a Kubernetes Job or PyTorchJob."""
    s.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="VENDOR=IMAGE",
        help="imported manifests: the image on another vendor (repeatable), e.g. huawei=...",
    )
    s.add_argument("--tenant", help="imported manifests: the tenant (admin tokens)")
    s.add_argument("--queue", help="imported manifests: the queue (default: default)")
    s.add_argument("--priority-class", help="imported manifests: the priority class")


def _with_import_flags(args: argparse.Namespace, text: str) -> str | dict[str, Any]:
    """The manifest with the import flags applied (unchanged when none is given)."""
    if not (args.image or args.tenant or args.queue or args.priority_class):
        return text
    images = dict(item.partition("=")[::2] for item in args.image)
    if not all(images.values()):
        raise SystemExit("--image takes VENDOR=IMAGE")
    document = yaml.safe_load(text)
    if not isinstance(document, dict):
        raise SystemExit("the manifest is not a mapping")
    return annotated(
        document,
        images,
        tenant=args.tenant,
        queue=args.queue,
        priority_class=args.priority_class,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `suanpan`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        from federation.simulation.cli import main as sim_main

        return sim_main(argv[1:])
    args = parser().parse_args(argv)
    if args.command in ("submit", "apply"):
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        args.manifest = _with_import_flags(args, text) if args.command == "submit" else text
    try:
        return asyncio.run(_run(args))
    except HubError as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cannot reach the hub: {exc}", file=sys.stderr)
        return 1
