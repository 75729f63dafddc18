"""Schemathesis drives the real hub process from its own /openapi.json: no request gives a 5xx."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.fleet import free_port

pytestmark = pytest.mark.integration

TOKEN = "sp_schemathesis_admin"


@pytest.fixture
def hub_process(pg_url: str, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": pg_url,
        "SUANPAN_ADMIN_TOKEN": TOKEN,
        "SUANPAN_PORT": str(port),
    }
    log = (tmp_path / "hub.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.hub_cli", "serve"], env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/readyz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError((tmp_path / "hub.log").read_text())
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def test_no_operation_answers_with_a_server_error(hub_process: str, tmp_path: Path) -> None:
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st is not None
    result = subprocess.run(
        [
            st,
            "run",
            f"{hub_process}/openapi.json",
            "--checks",
            "not_a_server_error",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            "--max-examples",
            "25",
            "--seed",
            "7",
            "--phases",
            "examples,coverage,fuzzing",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
