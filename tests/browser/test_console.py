"""The web console and the API reference in headless Chromium, against a real hub (embedded
PostgreSQL, scheduling loop) with two simulated clusters driven by real agents: every page
shows the numbers the API returns, and actions go through the API with the caller's role."""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from deploy.browser import Page, chromium, show, sign_in
from deploy.demo import job, task
from deploy.fleet import Fleet, local_fleet
from deploy.local.kube import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

ADMIN = "sp_console_admin"
MARKUP = '<img src=x onerror="window.pwned=1"><script>window.pwned=1</script>'
LONG = 6000  # simulated seconds: the jobs keep running while the tests look


@dataclass
class Console:
    fleet: Fleet
    page: Page
    viewer: str
    jobs: dict[str, str]  # name -> id

    async def show(self, route: str, page: str) -> None:
        if await self.page.evaluate("location.pathname") != "/ui":  # back from /docs
            await self.page.goto(f"{self.fleet.url}/ui{route}")
        await show(self.page, route, page)

    async def texts(self, selector: str) -> list[str]:
        """The text of every element matching `selector`."""
        found: list[str] = await self.page.evaluate(
            f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.textContent)"
        )
        return found

    async def sign_in(self, token: str) -> None:
        await sign_in(self.page, self.fleet.url, token)


async def _submit(fleet: Fleet, manifest: dict[str, Any]) -> str:
    created = await fleet.call("POST", "/v1/jobs", json=manifest)
    assert "id" in created, created
    return str(created["id"])


async def _state(fleet: Fleet, job_id: str, state: str) -> None:
    async def reached() -> bool:
        return bool((await fleet.call("GET", f"/v1/jobs/{job_id}"))["state"] == state)

    await wait_for(f"job {job_id} {state}", reached, 30)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def console() -> AsyncIterator[Console]:
    async with local_fleet(ADMIN) as fleet, chromium() as page:
        await fleet.call("POST", "/v1/tenants", json={"name": "nlp-lab"})
        quota = {"huawei/Ascend910B3": {"nominal": 16000, "borrowingLimit": 8000}}
        await fleet.call(
            "POST", "/v1/tenants/nlp-lab/queues", json={"name": "training", "quota": quota}
        )
        viewer = await fleet.call("POST", "/v1/tokens", json={"name": "eve", "role": "viewer"})
        await fleet.add_cluster("beijing-a", "dc-beijing", region="beijing")
        await fleet.add_cluster("shenzhen-a", "dc-shenzhen", region="shenzhen")

        async def registered() -> bool:
            items = (await fleet.call("GET", "/v1/clusters"))["items"]
            return len([c for c in items if c["flavors"]]) == 2

        await wait_for("both clusters registered", registered, 30)
        ascend = ["huawei/Ascend910B3"]
        jobs = {
            "blocker": await _submit(
                fleet, job("blocker", "nlp-lab", [task("t", ascend, 16, run_s=LONG)])
            )
        }
        await _state(fleet, jobs["blocker"], "Running")
        h100 = ["nvidia/H100*"]
        marked = job(
            "marked",
            "nlp-lab",
            [task("t", h100, 1, run_s=LONG), task("u", h100, 1, replicas=2, run_s=LONG)],
        )
        marked["spec"]["tasks"][0]["annotations"] = {"note": MARKUP}
        jobs["marked"] = await _submit(fleet, marked)
        await _state(fleet, jobs["marked"], "Running")
        jobs["giant"] = await _submit(fleet, job("giant", "nlp-lab", [task("t", ascend, 16)]))
        jobs["second"] = await _submit(fleet, job("second", "nlp-lab", [task("t", ascend, 16)]))

        async def explained() -> bool:
            why = await fleet.call("GET", f"/v1/jobs/{jobs['giant']}/explain")
            return bool(why["clusters"])

        await wait_for("the giant job explained", explained, 30)
        c = Console(fleet, page, str(viewer["token"]), jobs)
        await c.sign_in(ADMIN)
        yield c


def _fleet_rows(clusters: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The fleet page's device rows as the API's cluster summaries say they must read."""
    return {
        f"{c['name']}|{f['flavor']}": {
            "total": str(f["total"]),
            "unhealthy": str(f["total"] - f["healthy"]),
            "allocated": f"{f['allocatedMilli'] / 1000:g}",
            "inUse": str(f["healthy"] - f["freeWhole"]),
            "utilization": f"{math.floor(f['utilization'] + 0.5)}%" if f["reporting"] else "-",
        }
        for c in clusters
        for f in c["flavors"]
    }


async def test_fleet_page_shows_each_clusters_devices_as_the_api_counts_them(
    console: Console,
) -> None:
    await console.show("#/fleet", "fleet")
    clusters: list[dict[str, Any]] = []
    shown: dict[str, dict[str, str]] = {}

    async def as_the_api_counts() -> bool:
        """The page (refreshed every 5 s) against the API read just before it: live readings
        and starting jobs may move between two reads, never for long."""
        clusters[:] = (await console.fleet.call("GET", "/v1/clusters"))["items"]
        shown.clear()
        shown.update(
            await console.page.evaluate(
                """Object.fromEntries([...document.querySelectorAll('#clusters tbody tr')].map(
                     r => [r.dataset.cluster + '|' + r.dataset.flavor, Object.fromEntries(
                       [...r.querySelectorAll('[data-field]')].map(c =>
                         [c.dataset.field, c.textContent]))]))"""
            )
        )
        return shown == _fleet_rows(clusters)

    await wait_for(
        "the fleet page as the API counts",
        as_the_api_counts,
        30,
        interval_s=1.0,
        explain=lambda: f"shown {shown}, API {_fleet_rows(clusters)}",
    )
    assert any(f["allocatedMilli"] for c in clusters for f in c["flavors"])
    # the agents read every simulated device: live utilization per vendor/model and cluster
    assert all(f["reporting"] == f["total"] for c in clusters for f in c["flavors"])
    busy = await console.texts("#by-flavor tbody [data-field=utilization]")
    assert "-" not in busy and any(u != "0%" for u in busy), busy
    flavors = await console.page.evaluate(
        "[...document.querySelectorAll('#history polyline')].map(p => p.dataset.flavor)"
    )
    assert flavors == sorted({f["flavor"] for c in clusters for f in c["flavors"]})
    regions = await console.texts("#by-region tbody td:first-child")
    assert regions == ["beijing", "shenzhen"]


async def test_queues_page_shows_usage_against_quota_and_who_waits_in_which_order(
    console: Console,
) -> None:
    await console.show("#/queues", "queues")
    (queue,) = (await console.fleet.call("GET", "/v1/queues"))["items"]
    row = 'section[data-queue="nlp-lab/training"] tr[data-resource="huawei/Ascend910B3"]'
    cells = await console.texts(f"{row} td.num")
    usage = queue["usage"].get("huawei/Ascend910B3", 0)
    assert cells == [str(usage), "16000", "8000", str(max(0, usage - 16000))]
    share = await console.texts('section[data-queue="nlp-lab/training"] [data-field=fairShare]')
    assert share == [f"{100 * queue['fairShare']:.1f}%"] and queue["fairShare"] > 0
    waiting = await console.fleet.call("GET", "/v1/tenants/nlp-lab/queues/training/waiting")
    assert [w["name"] for w in waiting["items"]] == ["giant", "second"]
    shown = await console.texts('section[data-queue="nlp-lab/training"] table.waiting tbody tr')
    assert shown[0].startswith("1giant") and shown[1].startswith("2second")


async def test_jobs_list_filters_by_state_and_vendor_and_pages(console: Console) -> None:
    await console.show("#/jobs?state=Queued", "jobs")
    assert await console.texts("#jobs tbody td:first-child") == ["second", "giant"]
    await console.show("#/jobs?vendor=nvidia", "jobs")
    assert await console.texts("#jobs tbody td:first-child") == ["marked"]
    listed = (await console.fleet.call("GET", "/v1/jobs?limit=500"))["items"]
    await console.show("#/jobs?limit=1", "jobs")  # the hub's cursor, one job a page
    assert await console.texts("#jobs tbody td:first-child") == [listed[0]["name"]]
    await console.page.evaluate("document.querySelector('#more-jobs').click()")
    await console.page.wait(
        f"document.querySelector('#jobs tbody td')?.textContent === {json.dumps(listed[1]['name'])}"
    )
    assert await console.page.evaluate("document.querySelector('#first-jobs') !== null")


async def test_a_job_page_shows_its_manifest_events_and_explain(console: Console) -> None:
    giant = console.jobs["giant"]
    await console.show(f"#/jobs/{giant}", "job")
    why = await console.fleet.call("GET", f"/v1/jobs/{giant}/explain")
    events = (await console.fleet.call("GET", f"/v1/jobs/{giant}/events"))["items"]
    assert (await console.texts("#explain-summary")) == [why["summary"]]
    rows = await console.texts("#explain tbody tr")
    assert rows == [c["cluster"] + c["code"] + c["reason"] for c in why["clusters"]]
    shown = await console.texts("#events tbody td:nth-child(2)")
    assert shown[: len(events)] == [e["reason"] for e in events]
    manifest = json.loads((await console.texts("#manifest"))[0])
    assert manifest["metadata"]["name"] == "giant"
    assert await console.texts("#placement p") == ["not placed"]


async def test_a_job_page_shows_the_node_and_devices_of_each_replica(console: Console) -> None:
    marked = console.jobs["marked"]
    await console.show(f"#/jobs/{marked}", "job")
    events = (await console.fleet.call("GET", f"/v1/jobs/{marked}/events"))["items"]
    (placed,) = [e for e in events if e["reason"] == "Placed"]
    shown = await console.page.evaluate(
        "[...document.querySelectorAll('#placement tbody tr')].map(r => [r.dataset.replica,"
        " r.querySelector('[data-field=node]').textContent,"
        " r.querySelector('[data-field=devices]').textContent])"
    )
    assert [s[0] for s in shown] == ["t/0", "u/0", "u/1"]  # replicas count per task
    assert shown == [
        [f"{r['task']}/{r['replica']}", r["node"], ", ".join(map(str, r["devices"]))]
        for r in placed["data"]["replicas"]
    ]


async def test_a_job_page_shows_what_each_replica_did(console: Console) -> None:
    marked = console.jobs["marked"]
    await console.show(f"#/jobs/{marked}", "job")
    job = await console.fleet.call("GET", f"/v1/jobs/{marked}")
    shown = await console.page.evaluate(
        "[...document.querySelectorAll('#replicas tbody tr')].map(r => [r.dataset.replica,"
        " ...['node', 'phase', 'exit', 'reason'].map(f =>"
        " r.querySelector(`[data-field=${f}]`).textContent)])"
    )
    assert shown == [
        [f"{r['task']}/{r['replica']}", r["node"] or "-", r["phase"], "-", r["reason"] or "-"]
        for r in job["replicas"]
    ]
    assert [s[2] for s in shown] == ["Running"] * 3
    assert await console.texts('dd[data-field="attempts"]') == [str(job["attempts"])]


async def _log(fleet: Fleet, job_id: str) -> str:
    """The whole log of the job's first replica, as the API returns it."""
    headers = {"Authorization": f"Bearer {fleet.admin_token}"}
    connector = aiohttp.TCPConnector(ssl=fleet.client_tls() or True)
    async with (
        aiohttp.ClientSession(headers=headers, connector=connector) as s,
        s.get(f"{fleet.url}/v1/jobs/{job_id}/logs") as r,
    ):
        assert r.status == 200
        return await r.text()


async def _show_log(console: Console, tail: str, follow: bool) -> None:
    await console.page.evaluate(
        "(() => { const f = document.getElementById('log-form');"
        f"f.elements.tail.value = {json.dumps(tail)};"
        f"f.elements.follow.checked = {json.dumps(follow)};"
        "f.requestSubmit(); })()"
    )


async def test_a_job_page_shows_the_log_its_replica_wrote_and_follows_it(
    console: Console,
) -> None:
    blocker = console.jobs["blocker"]
    await console.show(f"#/jobs/{blocker}", "job")
    assert await console.texts("#log-form select[name=task] option") == ["t"]
    await _show_log(console, "3", follow=False)
    await console.page.wait("document.getElementById('logs-note').textContent === 'end of log'")
    shown = (await console.texts("#logs"))[0].splitlines()
    assert len(shown) == 3
    assert all(re.fullmatch(r"\[t-0\] step \d+: running on \S+", line) for line in shown)
    assert set(shown) <= set((await _log(console.fleet, blocker)).splitlines())
    await _show_log(console, "1", follow=True)
    followed = r"/^\[t-0\] step \d+$/m.test(document.getElementById('logs').textContent)"
    await console.page.wait(followed, timeout_s=20)
    await console.show("#/fleet", "fleet")  # leaving the job stops following its log
    assert await console.page.evaluate("logView.note") == "stopped"


async def test_a_job_without_a_pod_says_why_it_has_no_log(console: Console) -> None:
    await console.show(f"#/jobs/{console.jobs['giant']}", "job")
    await _show_log(console, "", follow=False)
    note = await console.page.wait(
        "document.getElementById('logs-note').textContent.startsWith('409')"
        " && document.getElementById('logs-note').textContent"
    )
    assert "never had a pod" in note


async def test_markup_in_a_job_is_shown_as_text_and_never_runs(console: Console) -> None:
    await console.show(f"#/jobs/{console.jobs['marked']}", "job")
    (annotations,) = await console.texts('dd[data-field="annotations"]')
    assert annotations == f"t: note={MARKUP}; u: suanpan.io/run-seconds={LONG}"
    assert await console.texts('dd[data-field="placement"]') == [
        "t on nvidia/H100-80GB, u on nvidia/H100-80GB"
    ]
    assert await console.page.evaluate("window.pwned === undefined")
    assert (
        await console.page.evaluate("document.querySelectorAll('main img, main script').length")
        == 0
    )


async def test_an_admin_cancels_a_job_and_cordons_a_cluster(console: Console) -> None:
    second = console.jobs["second"]
    await console.show(f"#/jobs/{second}", "job")
    await console.page.evaluate("document.querySelector('[data-action=Cancel]').click()")
    await console.page.wait("document.getElementById('job-state').textContent === 'Cancelled'")
    assert (await console.fleet.call("GET", f"/v1/jobs/{second}"))["state"] == "Cancelled"
    await console.show("#/fleet", "fleet")
    row = "#clusters tr[data-cluster=beijing-a]"
    await console.page.evaluate(f"document.querySelector('{row} [data-action=Cordon]').click()")
    await console.page.wait(f"document.querySelector('{row} .badge.cordoned') !== null")
    assert (await console.fleet.call("GET", "/v1/clusters/beijing-a"))["cordoned"] is True
    await console.fleet.call("POST", "/v1/clusters/beijing-a/uncordon")


async def test_a_viewer_is_offered_no_action_and_the_hub_refuses_one(console: Console) -> None:
    await console.sign_in(console.viewer)
    try:
        assert await console.texts("#who-role") == ["viewer"]
        assert await console.page.evaluate("document.querySelectorAll('[data-action]').length") == 0
        status = await console.page.evaluate(
            "fetch('/v1/clusters/beijing-a/cordon', {method: 'POST', headers: {Authorization:"
            " 'Bearer ' + sessionStorage.getItem('suanpan-token')}}).then(r => r.status)"
        )
        assert status == 403
        await console.show(f"#/jobs/{console.jobs['giant']}", "job")
        assert await console.page.evaluate("document.querySelectorAll('[data-action]').length") == 0
    finally:
        await console.sign_in(ADMIN)
    assert (await console.fleet.call("GET", "/v1/clusters/beijing-a"))["cordoned"] is False


async def test_docs_render_every_operation_and_try_it_out_calls_the_hub_with_the_token(
    console: Console,
) -> None:
    await console.page.goto(console.fleet.url + "/docs")
    operations = await console.page.wait(
        "document.querySelectorAll('.opblock').length", timeout_s=20
    )
    document = await console.fleet.call("GET", "/openapi.json")
    assert operations == sum(len(ops) for ops in document["paths"].values())
    op = "#operations-tokens-whoami"  # the console's token is pre-authorized
    await console.page.evaluate(f"document.querySelector('{op} .opblock-summary-control').click()")
    await console.page.wait(f"document.querySelector('{op} .execute') !== null")
    await console.page.evaluate(f"document.querySelector('{op} .execute').click()")
    body = await console.page.wait(
        f"document.querySelector('{op} .live-responses-table pre')?.textContent"
    )
    assert json.loads(body) == {"role": "admin", "tenant": None, "subject": None}


async def test_a_preemption_is_shown_on_the_page_of_both_jobs(console: Console) -> None:
    fleet = console.fleet
    await fleet.call("POST", "/v1/tenants", json={"name": "ops"})
    await fleet.call("POST", "/v1/tenants/ops/queues", json={"name": "urgent"})
    ascend = ["huawei/Ascend910B3"]
    victim = await _submit(
        fleet,
        job(
            "filler", "ops", [task("t", ascend, 8, run_s=LONG)], queue="urgent", priorityClass="low"
        ),
    )
    await _state(fleet, victim, "Running")  # beijing's 8; shenzhen's 16 run the blocker
    urgent = await _submit(
        fleet,
        job("urgent", "ops", [task("t", ascend, 8)], queue="urgent", priorityClass="critical"),
    )

    async def preempted() -> bool:
        events = (await fleet.call("GET", f"/v1/jobs/{urgent}/events"))["items"]
        return any(e["reason"] == "Preempting" for e in events)

    await wait_for("the urgent job preempting", preempted, 30)
    await console.show(f"#/jobs/{urgent}", "job")
    rows = await console.texts("#preemptions tbody tr td:nth-child(2)")
    assert rows == ["evicted"]
    links = await console.page.evaluate(
        "[...document.querySelectorAll('#preemptions tbody a')].map(a => a.hash)"
    )
    assert links == [f"#/jobs/{victim}"]
    await console.show(f"#/jobs/{victim}", "job")
    assert await console.texts("#preemptions tbody tr td:nth-child(2)") == ["evicted by"]
    links = await console.page.evaluate(
        "[...document.querySelectorAll('#preemptions tbody a')].map(a => a.hash)"
    )
    assert links == [f"#/jobs/{urgent}"]


async def test_a_cluster_whose_agent_went_silent_is_marked_lost(console: Console) -> None:
    await console.fleet.stop_agent("shenzhen-a")

    async def silent() -> bool:
        found = await console.fleet.call("GET", "/v1/clusters/shenzhen-a")
        return found["state"] in ("NotReady", "Offline")

    await wait_for("shenzhen-a silent", silent, 30)
    await console.show("#/fleet", "fleet")
    marks = await console.texts("#clusters tr[data-cluster] .badge")
    assert "lost" in await console.texts("#clusters tr[data-cluster=shenzhen-a] .badge")
    assert marks.count("lost") == 1


async def test_a_service_page_shows_its_shards_and_endpoints_as_the_api_does(
    console: Console,
) -> None:
    fleet = console.fleet
    manifest = {
        "apiVersion": "suanpan.io/v1",
        "kind": "Service",
        "metadata": {"name": "chat", "tenant": "nlp-lab"},
        "spec": {
            "queue": "training",
            "spread": {"clusters": 2},
            "ports": [{"name": "http", "port": 8000}],
            "server": {"image": "serve:1", "replicas": 2, "resources": {"cpu": "1"}},
        },
    }
    service = await fleet.call("POST", "/v1/services", json=manifest)

    async def ready() -> bool:
        found = await fleet.call("GET", f"/v1/services/{service['id']}")
        return bool(found["ready"] == 2)

    await wait_for("both replicas ready", ready, 60)
    await console.show("#/services", "services")
    assert await console.texts('#services tr[data-service="chat"] [data-field="desired"]') == ["2"]
    await console.show(f"#/services/{service['id']}", "service")
    detail = await fleet.call("GET", f"/v1/services/{service['id']}")
    shown = await console.page.evaluate(
        "[...document.querySelectorAll('#shards tbody tr')].map(r => [r.dataset.shard,"
        " ...['held', 'cap', 'ready'].map(f => r.querySelector(`[data-field=${f}]`).textContent)])"
    )
    assert shown == [
        [s["name"], str(s["held"]), str(s["cap"]), str(s["ready"])] for s in detail["shards"]
    ]
    endpoints = (await fleet.call("GET", f"/v1/services/{service['id']}/endpoints"))["items"]
    addresses = await console.texts('#endpoints [data-field="address"]')
    # one endpoint per shard: two while both clusters are Ready (an earlier test of this module
    # may have silenced one, and then one shard holds both replicas)
    assert addresses == [e["address"] for e in endpoints] and len(addresses) == len(shown)
    assert await console.texts('dd[data-field="desired"]') == ["2"]
    await fleet.call("DELETE", f"/v1/services/{service['id']}")
