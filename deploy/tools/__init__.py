"""Pinned Go tools of the tests (helm, promtool), built by deploy/tools/build.sh."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from deploy.local.binaries import BuildError, run_build_script

BUILD_SCRIPT = Path(__file__).resolve().parent / "build.sh"
Tool = Literal["helm", "promtool"]


def ensure_tool(tool: Tool) -> Path:
    """Path of `tool`, built from its module in deploy/tools/<tool> when its cache is cold
    (minutes); a failed build raises BuildError, never skips."""
    path = run_build_script(BUILD_SCRIPT, tool)
    if not path.is_file():
        raise BuildError(f"{BUILD_SCRIPT} {tool} printed {path}, which is not a file")
    return path
