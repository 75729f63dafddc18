"""`sim openb ...` on a tiny trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from federation.simulation.cli import main, parse_seeds


def test_seed_ranges() -> None:
    assert parse_seeds("42-44") == [42, 43, 44]
    assert parse_seeds("42,45") == [42, 45]


def test_json_run_reports_the_headline_numbers(
    trace_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUANPAN_OPENB_DIR", str(trace_dir))
    args = ["openb", "--policy", "fgd", "--seeds", "42-43", "--workers", "1", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "fgd" and out["clusters"] == 1 and out["seeds"] == [42, 43]
    for key in ("unallocated_gpu_pct_at_100", "frag_pct_of_idle_at_90", "failed_pods", "runtime_s"):
        assert key in out


def test_multi_cluster_and_dynamic_runs(
    trace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = str(trace_dir / "openb_node_list_gpu_node.csv")
    pods = str(trace_dir / "openb_pod_list_default.csv")
    base = ["openb", "--nodes", nodes, "--pods", pods, "--workers", "1", "--json"]
    assert main([*base, "--clusters", "2", "--seeds", "42"]) == 0
    assert json.loads(capsys.readouterr().out)["clusters"] == 2
    assert main([*base, "--dynamic"]) == 0
    dynamic = json.loads(capsys.readouterr().out)
    assert dynamic["never_started"] == 0 and "delay_p99_s_high" in dynamic


def test_missing_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["openb", "--nodes", str(tmp_path / "nope.csv")])
    assert "does not exist" in capsys.readouterr().err
