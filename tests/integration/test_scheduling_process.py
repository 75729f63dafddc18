"""`suanpan-hub serve` runs its scheduling loop in a child process: the loop leads and reports
through the hub's `/metrics`, a dead loop process is started again, and a hub killed with
SIGKILL takes its loop process down with it (so another replica can take the lead)."""

from __future__ import annotations

import signal
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import ADMIN_TOKEN
from tests.integration.test_persistence import HubProcess

pytestmark = pytest.mark.integration


def _loop_children(hub: HubProcess) -> list[psutil.Process]:
    """The hub's live loop processes (a killed one not yet reaped is a zombie: not counted)."""
    found = []
    for p in psutil.Process(hub.proc.pid).children():
        try:
            command = p.cmdline()
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
        if "schedule" in command and "api.hub_cli" in command:
            found.append(p)
    return found


def _leads(hub: HubProcess) -> bool:
    req = urllib.request.Request(hub.url + "/metrics")
    req.add_header("Authorization", f"Bearer {ADMIN_TOKEN}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return "suanpan_scheduler_leader 1.0" in resp.read().decode()


def _eventually(check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s} s")


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubProcess]:
    started = HubProcess(tmp_path / "data", tmp_path / "hub.log")
    yield started
    if started.proc.poll() is None:
        started.stop(signal.SIGKILL)


def test_the_loop_runs_in_a_child_that_leads_and_is_restarted(hub: HubProcess) -> None:
    _eventually(lambda: len(_loop_children(hub)) == 1 and _leads(hub))
    first = _loop_children(hub)[0]
    first.kill()
    _eventually(lambda: [p.pid for p in _loop_children(hub)] not in ([], [first.pid]))
    _eventually(lambda: _leads(hub))


def test_a_killed_hub_takes_its_loop_process_down(hub: HubProcess) -> None:
    _eventually(lambda: len(_loop_children(hub)) == 1)
    child = _loop_children(hub)[0]
    hub.stop(signal.SIGKILL)
    child.wait(timeout=10)  # psutil: raises TimeoutExpired if it outlives its parent
