"""`make demo`: the hub on an embedded PostgreSQL, driven over its REST API, with a report.

Everything is real: a PostgreSQL 16 server in a temporary folder, the hub's aiohttp
application on a loopback port, HTTP calls with bearer tokens. Nothing is left behind.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import textwrap
from typing import Any

from aiohttp import web

from api.app import create_app
from api.cli import table
from api.client import HubClient, HubError
from federation.store import migrate
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres

ADMIN = "sp_demo_admin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _job(name: str, queue: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"queue": queue, "tasks": tasks, **spec},
    }


def _accel(count: int, *flavors: str, fraction: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"count": count, "anyOf": [{"flavor": f} for f in flavors]}
    if fraction is not None:
        out["fraction"] = fraction
    return out


def section(title: str) -> None:
    """Print a report heading."""
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


async def _setup(admin: HubClient) -> dict[str, str]:
    tokens = {}
    for tenant, cohort, quota in (
        (
            "nlp-lab",
            "research",
            {"huawei/Ascend910B3": {"nominal": 32000, "borrowingLimit": 16000}},
        ),
        (
            "vision-lab",
            "research",
            {"nvidia/H100-80GB": {"nominal": 16000, "borrowingLimit": 8000}},
        ),
    ):
        await admin.request("POST", "/v1/tenants", json={"name": tenant})
        await admin.request(
            "POST",
            f"/v1/tenants/{tenant}/queues",
            json={"name": "training", "cohort": cohort, "weight": 1.0, "quota": quota},
        )
        issued = await admin.request(
            "POST", "/v1/tokens", json={"name": f"{tenant}-ci", "role": "member", "tenant": tenant}
        )
        tokens[tenant] = issued["token"]
    return tokens


async def _workload(url: str, tokens: dict[str, str]) -> None:
    async with HubClient(url, tokens["nlp-lab"]) as nlp, HubClient(url, tokens["vision-lab"]) as cv:
        worker = {
            "name": "trainer",
            "replicas": 2,
            "images": {"huawei": "mindspore:2.3", "nvidia": "pytorch:2.4"},
        }
        await nlp.submit(
            _job(
                "llm-pretrain",
                "training",
                [
                    {
                        **worker,
                        "resources": {
                            "cpu": "32",
                            "memory": "256Gi",
                            "accelerators": _accel(8, "huawei/Ascend910B3", "nvidia/H100*"),
                        },
                    }
                ],
                priorityClass="high",
            ),
            idempotency_key="llm-pretrain-1",
        )
        # the CI retries the same submission: the key makes it a no-op
        await nlp.submit(
            _job(
                "llm-pretrain",
                "training",
                [
                    {
                        **worker,
                        "resources": {
                            "cpu": "32",
                            "memory": "256Gi",
                            "accelerators": _accel(8, "huawei/Ascend910B3", "nvidia/H100*"),
                        },
                    }
                ],
                priorityClass="high",
            ),
            idempotency_key="llm-pretrain-1",
        )
        await nlp.submit(
            _job(
                "rlhf-pipeline",
                "training",
                [
                    {
                        "name": "preprocess",
                        "replicas": 4,
                        "image": "python:3.11",
                        "resources": {"cpu": "16", "memory": "64Gi"},
                    },
                    {
                        "name": "trainer",
                        "replicas": 1,
                        "images": {"huawei": "mindspore:2.3"},
                        "resources": {
                            "cpu": "16",
                            "memory": "128Gi",
                            "accelerators": _accel(8, "huawei/*"),
                        },
                    },
                ],
            )
        )
        await cv.submit(
            _job(
                "vit-sweep",
                "training",
                [
                    {
                        "name": "trial",
                        "replicas": 8,
                        "image": "pytorch:2.4",
                        "resources": {
                            "cpu": "4",
                            "memory": "32Gi",
                            "accelerators": _accel(1, "nvidia/*", fraction=0.5),
                        },
                    }
                ],
                priorityClass="low",
            )
        )
        await cv.submit(
            _job(
                "serve-prefill-decode",
                "training",
                [
                    {
                        "name": "prefill",
                        "replicas": 2,
                        "image": "vllm:0.6",
                        "resources": {"accelerators": _accel(4, "nvidia/H100*")},
                    },
                    {
                        "name": "decode",
                        "replicas": 4,
                        "images": {"huawei": "vllm-ascend:0.6", "nvidia": "vllm:0.6"},
                        "resources": {
                            "accelerators": _accel(1, "huawei/Ascend910B*", "nvidia/L40S")
                        },
                    },
                ],
            )
        )
        section("bad input is refused with the exact field, and nothing is written")
        bad = _job("Bad_Name", "training", [{"name": "w", "replicas": 0, "image": "x"}])
        try:
            await cv.submit(bad)
        except HubError as exc:
            print(textwrap.indent(str(exc), "  "))
        section("one tenant cannot see the other's jobs")
        page = await cv.request("GET", "/v1/jobs")
        print(
            f"  vision-lab sees {len(page['items'])} jobs: {', '.join(j['name'] for j in page['items'])}"
        )


async def main() -> None:
    """Run the demo end to end and print the report."""
    logging.basicConfig(level=logging.ERROR)
    pg = EmbeddedPostgres()
    url = await pg.start()
    print(f"embedded PostgreSQL 16 at {pg.datadir}")
    await migrate.upgrade(url)
    db = Database(url)
    await ensure_admin_token(db, ADMIN)
    runner = web.AppRunner(create_app(db), access_log=None)
    await runner.setup()
    port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    hub = f"http://127.0.0.1:{port}"
    print(f"hub API at {hub} (OpenAPI: {hub}/openapi.json, reference: {hub}/docs)")
    try:
        async with HubClient(hub, ADMIN) as admin:
            tokens = await _setup(admin)
            await _workload(hub, tokens)
            section("what the hub holds")
            page = await admin.request("GET", "/v1/jobs")
            rows = [
                [
                    j["id"][:8],
                    j["tenant"],
                    j["name"],
                    j["priorityClass"],
                    j["state"],
                    sum(t["replicas"] for t in j["spec"]["spec"]["tasks"]),
                ]
                for j in reversed(page["items"])
            ]
            print(table(rows, ["ID", "TENANT", "JOB", "PRIORITY", "STATE", "PODS"]))
            queues = await admin.request("GET", "/v1/queues")
            print()
            print(
                table(
                    [
                        [
                            q["tenant"],
                            q["name"],
                            q["cohort"],
                            ", ".join(f"{k}: {v['nominal']}" for k, v in q["quota"].items()),
                            ", ".join(f"{k}={v}" for k, v in q["jobs"].items()),
                        ]
                        for q in queues["items"]
                    ],
                    ["TENANT", "QUEUE", "COHORT", "QUOTA (milli-devices)", "JOBS"],
                )
            )
            first = page["items"][-1]
            events = await admin.request("GET", f"/v1/jobs/{first['id']}/events")
            print(
                f"\nevents of {first['name']}: " + ", ".join(e["reason"] for e in events["items"])
            )
    finally:
        await runner.cleanup()
        await db.close()
        await pg.stop()
    print("\ndemo finished; the embedded database was removed")


if __name__ == "__main__":
    asyncio.run(main())
