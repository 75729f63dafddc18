"""The scheduling core is pure: no clock, no randomness, no event loop, no I/O libraries."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import federation.scheduling

ROOT = Path(federation.scheduling.__file__).parent
FORBIDDEN = {"asyncio", "time", "random", "aiohttp", "sqlalchemy", "asyncpg", "kubernetes_asyncio"}
SOURCES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_module_is_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            names = []
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
        assert not isinstance(
            node, ast.AsyncFunctionDef | ast.Await | ast.AsyncFor | ast.AsyncWith
        ), f"{path.name}:{getattr(node, 'lineno', '?')} is async"
