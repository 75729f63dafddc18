"""Fuzzing the hub API: schemathesis from the hub's own OpenAPI document (every phase, stateful
links, positive and negative data) and hypothesis manifests full of hostile strings and numbers.

What must hold: no server error, and every response as the OpenAPI document says. `make test`
runs a short pass (tests/integration/test_schemathesis.py); `make bench` a long one (`run`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.api_throughput import UNLIMITED, config_file
from bench.results import Figure
from deploy.fleet import free_port

ADMIN_TOKEN = "sp_fuzz_admin"
# positive_data_acceptance is left out: the document cannot express every rule a valid
# request must also meet (an image per task, a cluster for an agent token, a cursor the hub
# issued, an integer written without ".0"); those answer a documented 422
CHECKS = "all"
EXCLUDED_CHECKS = "positive_data_acceptance"
# links come from the document and from Location headers; guessing them from names pairs a
# tenant's name with a queue's path parameter and reports the missing queue as a failure
CONFIG = '[phases.stateful.inference]\nalgorithms = ["location-headers"]\n'
EXAMPLES = 200  # per operation, in the long pass
REQUEST_TIMEOUT_S = 75  # above the longest long-poll an agent may ask for (wait <= 60 s)
MANIFESTS = 5000


@contextlib.contextmanager
def serve_hub(database_url: str, log_path: Path) -> Iterator[str]:
    """A real `suanpan-hub serve` process on a free port, its rate limits off (the fuzzer
    sends as fast as it can); yields its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SUANPAN_ADMIN_TOKEN": ADMIN_TOKEN,
        "SUANPAN_PORT": str(port),
    }
    with log_path.open("w") as log, config_file(UNLIMITED) as config:
        proc = subprocess.Popen(
            [sys.executable, "-m", "api.hub_cli", "serve", f"--config={config}"],
            env=env,
            stdout=log,
            stderr=log,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(150):
                try:
                    urllib.request.urlopen(url + "/readyz", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                raise RuntimeError(log_path.read_text())
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # busy with a request the fuzzer left behind
                proc.kill()
                proc.wait()


def call(url: str, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    """One JSON request; the status and the decoded body (text if not JSON)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            status, raw, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, raw, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "")
    return status, json.loads(raw) if "json" in ctype else raw.decode(errors="replace")


@dataclass
class Tenant:
    """What the fuzzers act on: a tenant with a queue, a member token and an agent token."""

    member: str
    agent: str


def seed(url: str) -> Tenant:
    """Create tenant `fuzz`, queue `default` and cluster `fuzz-c1` (idempotent enough)."""
    call(url, "POST", "/v1/tenants", ADMIN_TOKEN, {"name": "fuzz"})
    call(url, "POST", "/v1/tenants/fuzz/queues", ADMIN_TOKEN, {"name": "default"})
    _, member = call(
        url, "POST", "/v1/tokens", ADMIN_TOKEN, {"name": "fm", "role": "member", "tenant": "fuzz"}
    )
    _, agent = call(
        url,
        "POST",
        "/v1/tokens",
        ADMIN_TOKEN,
        {"name": "fa", "role": "agent", "cluster": "fuzz-c1"},
    )
    return Tenant(member["token"], agent["token"])


@dataclass
class SchemathesisResult:
    """Counts of one or more schemathesis runs."""

    cases: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    output: str = ""


# schemathesis's own crash (an exception inside its coverage phase, not a response of ours);
# seen once in about twenty CI runs, never reproduced with the same seed, so such a run is
# done once more with the next seed, and a second crash fails
FUZZER_CRASH = "Runtime Error"


def schemathesis(
    url: str, tenant: Tenant, workdir: Path, *, max_examples: int, seed_value: int = 7
) -> SchemathesisResult:
    """Run schemathesis twice, as admin (every operation but the agent's) and as agent."""
    st_bin = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st_bin is not None, "schemathesis is not installed"
    config = workdir / "schemathesis.toml"
    config.write_text(CONFIG)
    result = SchemathesisResult()
    for name, token, scope, phases in (
        ("admin", ADMIN_TOKEN, "--exclude-path-regex", "examples,coverage,fuzzing,stateful"),
        ("agent", tenant.agent, "--include-path-regex", "examples,coverage,fuzzing"),  # no links
    ):
        for attempt in range(2):
            run, data = _run_schemathesis(
                [
                    st_bin,
                    "--config-file",
                    str(config),
                    "run",
                    f"{url}/openapi.json",
                    scope,
                    "^/v1/agent/",
                    "-H",
                    f"Authorization: Bearer {token}",
                    "--phases",
                    phases,
                    "--max-examples",
                    str(max_examples),
                    "--seed",
                    str(seed_value + attempt),
                ],
                workdir / f"st-{name}-{attempt}.json",
            )
            crashed = {e["title"] for e in data["errors"]} == {FUZZER_CRASH}
            if run.returncode != 0:
                crash_at = max(run.stdout.find(FUZZER_CRASH), 0) if crashed else -8000
                result.output += run.stdout[crash_at:][:8000] + run.stderr[-2000:]
            if not (crashed and not data["failures"]) or attempt == 1:
                break
        result.cases += int(data["test_cases"]["generated"])
        result.failures += data["failures"] + [{"error": e} for e in data["errors"]]
    return result


def _run_schemathesis(
    args: list[str], report: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """One schemathesis run with this suite's checks and limits; its process and JSON report."""
    run = subprocess.run(
        [
            *args,
            "--checks",
            CHECKS,
            "--exclude-checks",
            EXCLUDED_CHECKS,
            "--mode",
            "all",
            "--workers",
            "2",
            "--request-timeout",
            str(REQUEST_TIMEOUT_S),
            # performance is measured in benchmarks, not asserted here: schemathesis's
            # default 10 s response-time check only flags a loaded machine
            "--max-response-time",
            str(REQUEST_TIMEOUT_S),
            "--report-json-path",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=report.parent,
    )
    return run, json.loads(report.read_text())


BASE: dict[str, Any] = {
    "apiVersion": "suanpan.io/v1",
    "kind": "Job",
    "metadata": {"name": "fuzz", "labels": {"team": "a"}},
    "spec": {
        "queue": "default",
        "tasks": [
            {
                "name": "worker",
                "image": "pytorch:2.4",
                "env": {"A": "1"},
                "annotations": {"a": "b"},
                "command": ["python"],
                "resources": {"cpu": "1", "memory": "1Gi"},
            }
        ],
    },
}
T = ("spec", "tasks", 0)
PATHS: list[tuple[str | int, ...]] = [
    ("metadata", "name"),
    ("metadata", "labels", "team"),
    ("metadata", "labels"),
    ("spec", "queue"),
    ("spec", "priorityClass"),
    ("spec", "gang"),
    ("spec", "preemptible"),
    ("spec", "maxRuntimeSeconds"),
    (*T, "name"),
    (*T, "image"),
    (*T, "replicas"),
    (*T, "command", 0),
    (*T, "env", "A"),
    (*T, "env"),
    (*T, "annotations"),
    (*T, "annotations", "a"),
    (*T, "resources", "cpu"),
    (*T, "resources", "memory"),
]
_SPECIAL_TEXT = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "x\n",
    "\n",
    "１６",
    "16 ",
    " 16",
    "16Gi\n",
    "٣",
    "1e99999",
    "-1",
    "0",
    "a" * 64,
    "a" * 5000,
    "é",
    "\ud7ff",
    "𝟙𝟞",
    "true",
    "off",
    "null",
]
STRINGS = st.one_of(st.sampled_from(_SPECIAL_TEXT), st.text(max_size=80))
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**30, 0, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
KEYS = st.one_of(st.sampled_from(_SPECIAL_TEXT), st.text(max_size=40))
VALUES = st.one_of(
    STRINGS,
    NUMBERS,
    st.none(),
    st.dictionaries(KEYS, STRINGS, max_size=4),
    st.lists(STRINGS, max_size=3),
    st.integers(min_value=1, max_value=400).map(lambda n: json.loads("[" * n + "]" * n)),
)


def hostile_manifests() -> st.SearchStrategy[dict[str, Any]]:
    """A valid manifest with one to four fields replaced by hostile strings or numbers."""
    edits = st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=4)
    return edits.map(_apply)


def _apply(edits: list[tuple[tuple[str | int, ...], Any]]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for path, value in edits:
        node: Any = doc
        with contextlib.suppress(LookupError, TypeError):  # an earlier edit replaced a parent
            for part in path[:-1]:
                node = node[part]
            node[path[-1]] = value
    return doc


@dataclass
class ManifestResult:
    """What the hub answered to hostile manifests."""

    cases: int = 0
    accepted: int = 0
    refused: int = 0
    server_errors: list[tuple[int, Any, Any]] = field(default_factory=list)
    malformed: list[tuple[int, Any, Any]] = field(default_factory=list)


def fuzz_manifests(url: str, tenant: Tenant, *, examples: int) -> ManifestResult:
    """Submit hostile manifests: each a 201 job or a 4xx problem document naming a field."""
    result = ManifestResult()

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(hostile_manifests())
    def submit(manifest: dict[str, Any]) -> None:
        status, body = call(url, "POST", "/v1/jobs", tenant.member, manifest)
        result.cases += 1
        if status >= 500:
            result.server_errors.append((status, manifest, body))
        elif status in (200, 201):
            result.accepted += 1
            if not isinstance(body, dict) or body.get("spec", {}).get("kind") != "Job":
                result.malformed.append((status, manifest, body))
        elif not (isinstance(body, dict) and body.get("status") == status and body.get("detail")):
            result.malformed.append((status, manifest, body))
        else:
            result.refused += 1
            named = body.get("errors") or "not valid" in body["detail"]
            if body.get("type", "").endswith("/invalid-input") and not named:
                result.malformed.append((status, manifest, body))

    submit()
    return result


def run() -> list[Figure]:
    """The long pass for `make bench`: more examples per operation, more manifests."""
    import asyncio
    import tempfile

    from federation.store.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres()
    db_url = asyncio.run(pg.start())
    workdir = Path(tempfile.mkdtemp(prefix="suanpan-fuzz-"))
    try:
        from federation.store import migrate

        asyncio.run(migrate.upgrade(db_url))
        with serve_hub(db_url, workdir / "hub.log") as url:
            tenant = seed(url)
            start = time.perf_counter()
            api = schemathesis(url, tenant, workdir, max_examples=EXAMPLES)
            manifests = fuzz_manifests(url, tenant, examples=MANIFESTS)
            seconds = time.perf_counter() - start
    finally:
        asyncio.run(pg.stop())
        shutil.rmtree(workdir, ignore_errors=True)
    params = {"max_examples": EXAMPLES, "manifests": manifests.cases, "seconds": round(seconds)}
    return [
        Figure("fuzz_schemathesis_cases", api.cases, "cases", True, params),
        Figure("fuzz_schemathesis_failures", len(api.failures), "failures", False, params),
        Figure("fuzz_manifest_cases", manifests.cases, "cases", True, params),
        Figure("fuzz_manifest_server_errors", len(manifests.server_errors), "errors", False),
        Figure("fuzz_manifest_malformed_answers", len(manifests.malformed), "answers", False),
    ]
