"""`suanpan apply`, `get services|endpoints`, `describe service` and `delete service`: the
CLI's side of services (a service is named by its name, or by its id)."""

from __future__ import annotations

import argparse
import uuid
from typing import Any

import yaml

from api.cli_output import emit, indented
from api.client import HubClient, HubError
from federation.wire.http import IDEMPOTENCY_HEADER

SERVICE_HEADER = ["NAME", "TENANT", "QUEUE", "PRIORITY", "DESIRED", "GENERATION", "STATE"]
SHARD_HEADER = ["SHARD", "CLUSTER", "STATE", "HELD", "CAP", "READY", "UPDATED", "GENERATION"]
ENDPOINT_HEADER = ["SHARD", "CLUSTER", "REGION", "ADDRESS", "CLUSTER-IP", "PORTS", "READY"]


def service_name(text: str) -> str:
    """The name of the Service manifest `text`; anything else stops with a message."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SystemExit(f"the manifest is not YAML: {exc}") from exc
    if not isinstance(document, dict) or document.get("kind") != "Service":
        raise SystemExit("apply takes a manifest of kind Service (submit a Job with `submit`)")
    name = (document.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise SystemExit("the manifest has no metadata.name")
    return name


async def apply(client: HubClient, text: str, idempotency_key: str | None) -> None:
    """Update the service the manifest names, or create it where none lives by that name."""
    name = service_name(text)
    yaml_body = {"Content-Type": "application/yaml"}
    try:
        service = await client.request("PUT", f"/v1/services/{name}", data=text, headers=yaml_body)
        print(f"service {name} configured (generation {service['generation']})")
    except HubError as exc:
        if exc.status != 404:
            raise
        key = {IDEMPOTENCY_HEADER: idempotency_key or str(uuid.uuid4())}  # safe to resend
        service = await client.request(
            "POST", "/v1/services", data=text, headers={**yaml_body, **key}
        )
        print(f"service {name} created ({service['id']})")


def _service_rows(items: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            s["name"],
            s["tenant"],
            s["queue"],
            s["priorityClass"],
            s["desired"],
            s["generation"],
            s["state"],
        ]
        for s in items
    ]


async def get_services(client: HubClient, args: argparse.Namespace) -> None:
    """`get services [NAME]`: live services, newest first, or the one named."""
    if args.name:
        service = await client.request("GET", f"/v1/services/{args.name}")
        emit(service, args.output, _service_rows([service]), SERVICE_HEADER)
        return
    page = await client.request("GET", "/v1/services", params={"limit": str(args.limit)})
    emit(page, args.output, _service_rows(page["items"]), SERVICE_HEADER)


async def get_endpoints(client: HubClient, args: argparse.Namespace) -> None:
    """`get endpoints NAME`: where each shard of the service serves."""
    if not args.name:
        raise SystemExit("get endpoints takes the service's name")
    found = await client.request("GET", f"/v1/services/{args.name}/endpoints")
    rows = [
        [
            e["shard"],
            e["cluster"],
            e["region"] or "-",
            e["address"],
            e["clusterIP"] or "-",
            ",".join(f"{p['name']}:{p['port']}/{p['protocol']}" for p in e["ports"]) or "-",
            f"{e['ready']} ({e['updated']} updated)",
        ]
        for e in found["items"]
    ]
    emit(found, args.output, rows, ENDPOINT_HEADER)


def _scaling(status: dict[str, Any] | None) -> str:
    if status is None:
        return "fixed"
    average = "no reading yet" if status["average"] is None else f"{status['average']:.2f}"
    return (
        f"{status['metric']} average {average} over {status['sampled']} replicas, target "
        f"{status['target']:g}, replicas {status['minReplicas']}-{status['maxReplicas']}"
    )


async def describe_service(client: HubClient, name: str) -> None:
    """A service (without its manifest), how it scales, its shards and its latest events."""
    service = await client.request("GET", f"/v1/services/{name}")
    shown = {
        k: v for k, v in service.items() if k not in ("spec", "shards", "events", "autoscaling")
    }
    print(yaml.safe_dump(shown, sort_keys=False), end="")
    print(f"autoscaling: {_scaling(service['autoscaling'])}")
    if service["shards"]:
        print("shards:")
        rows = [
            [
                s["name"],
                s["cluster"] or "-",
                s["state"],
                s["held"],
                "-" if s["cap"] is None else s["cap"],
                s["ready"],
                s["updated"],
                s["generation"],
            ]
            for s in service["shards"]
        ]
        indented(rows, SHARD_HEADER)
    print("events:")
    for e in service["events"]:
        print(f"  {e['createdAt'][11:19]}  {e['reason']:<14} {e['message']}")


async def delete_service(client: HubClient, name: str) -> None:
    """Delete a service; its clusters remove its pods shortly after."""
    service = await client.request("DELETE", f"/v1/services/{name}")
    print(f"service {service['name']} {service['state']}")
