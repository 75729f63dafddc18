"""One writer of states: no module but `federation.store.lifecycle` writes a `state` column
or opens a placement (a statement-level check over the source, so a new writer fails here)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWNER = ROOT / "federation" / "store" / "lifecycle.py"
# log requests (Pending, Streaming, Closed) and services (Active, Deleted) have states of their
# own, not a job's, cluster's or placement's: their store modules write them
OWN_STATES = (
    ROOT / "federation" / "store" / "logs.py",
    ROOT / "federation" / "store" / "services.py",
)


def _writes_state(node: ast.Call) -> bool:
    """`….values(state=…)` or `….values({"state": …})`."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr == "values"):
        return False
    if any(k.arg == "state" for k in node.keywords):
        return True
    return any(
        isinstance(a, ast.Dict)
        and any(isinstance(k, ast.Constant) and k.value == "state" for k in a.keys)
        for a in node.args
    )


def _sql_writes_state(node: ast.Call) -> bool:
    """`sa.text("UPDATE ... SET state = ...")` or an INSERT naming a state column."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr == "text" and node.args):
        return False
    arg = node.args[0]
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        return False
    sql = " ".join(arg.value.lower().split())
    # a bare `state =` may be an UPDATE's assignment; an alias's `p.state =` only reads
    return bool(re.search(r"set state|, state|\(state|(?<![.\w])state =", sql))


def test_reading_an_aliased_state_is_no_write_and_setting_one_is() -> None:
    def text(sql: str) -> ast.Call:
        call = ast.parse(f"sa.text({sql!r})").body[0]
        assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
        return call.value

    assert not _sql_writes_state(text("SELECT 1 FROM placements p WHERE p.state = 'Active'"))
    assert _sql_writes_state(text("UPDATE jobs SET epoch = 2, state = 'Queued'"))
    assert _sql_writes_state(text("UPDATE jobs SET state='Queued'"))


def _inserts_placement(node: ast.Call) -> bool:
    return (
        isinstance(node.func, ast.Attribute)
        and node.func.attr == "insert"
        and any(isinstance(a, ast.Name) and a.id == "placements" for a in node.args)
    )


def test_only_the_lifecycle_module_writes_states() -> None:
    offenders = []
    for package in ("federation", "api", "cluster_agents", "deploy"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == OWNER or path in OWN_STATES:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and (
                    _writes_state(node) or _inserts_placement(node) or _sql_writes_state(node)
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_check_sees_a_state_write() -> None:
    call = ast.parse("sa.update(jobs).values(state='Queued')").body[0].value  # type: ignore[attr-defined]
    assert _writes_state(call)
    raw = ast.parse("sa.text('UPDATE jobs SET state = 1')").body[0].value  # type: ignore[attr-defined]
    assert _sql_writes_state(raw)
