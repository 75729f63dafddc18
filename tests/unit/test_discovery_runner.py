"""Running real processes: output, missing tools, failures, time limits; the CLI dry run."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from cluster_agents.discovery import ToolFailed, ToolMissing, run_tool
from cluster_agents.discovery.cli import main
from federation.catalog import labels as L

DATA = Path(__file__).parent / "data" / "discovery"


async def test_run_tool_returns_stdout() -> None:
    assert await run_tool([sys.executable, "-c", "print('ok')"], 10) == "ok\n"


async def test_missing_tool() -> None:
    with pytest.raises(ToolMissing):
        await run_tool(["suanpan-no-such-tool"], 10)


async def test_failing_tool_reports_status_and_stderr() -> None:
    code = "import sys; sys.stderr.write('driver not loaded'); sys.exit(9)"
    with pytest.raises(ToolFailed, match="exit status 9: driver not loaded"):
        await run_tool([sys.executable, "-c", code], 10)


async def test_hanging_tool_is_killed_at_the_time_limit() -> None:
    started = time.monotonic()
    with pytest.raises(ToolFailed, match=r"no answer within 0\.3s"):
        await run_tool([sys.executable, "-c", "import time; time.sleep(30)"], 0.3)
    assert time.monotonic() - started < 10


def fake_tool(directory: Path, name: str, sample: str) -> None:
    script = directory / name
    script.write_text(f"#!{sys.executable}\nprint(open({str(DATA / sample)!r}).read(), end='')\n")
    script.chmod(0o755)


def test_cli_dry_run_prints_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_tool(tmp_path, "xpu_smi", "xpu_smi.txt")
    monkeypatch.setenv("PATH", str(tmp_path))  # no other vendor tool can be found
    assert main(["--dry-run", "--timeout", "10"]) == 0
    labels = json.loads(capsys.readouterr().out)
    assert labels[L.MODEL] == "P800" and labels[L.COUNT] == "7"


def test_cli_needs_a_node_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main([]) == 2
    assert "NODE_NAME" in capsys.readouterr().err
    assert os.environ.get("NODE_NAME") is None


def test_cli_dry_run_reports_a_failing_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "npu-smi"
    script.write_text(f"#!{sys.executable}\nraise SystemExit('dcmi module initialize failed')\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["--dry-run"]) == 1
    assert "dcmi module initialize failed" in capsys.readouterr().err
