"""The benchmark's profile summary: each sample is charged to the first part named from the
leaf up, by the API's rules or the scheduling loop's."""

from __future__ import annotations

from collections import Counter

from bench.profile import LOOP_PARTS, Profile, markdown


def _frame(function: str, path: str) -> str:
    return f"{function} ({path}:1)"


LOOP = _frame("_lead", "/repo/federation/controllers/scheduler.py")
STACKS = Counter(
    {
        ";".join([LOOP, _frame("schedule", "/repo/federation/scheduling/cycle.py")]): 6,
        ";".join(
            [
                LOOP,
                _frame("read", "/repo/federation/controllers/snapshot.py"),
                _frame("execute", "/venv/site-packages/sqlalchemy/engine/base.py"),
            ]
        ): 3,
        ";".join([LOOP, _frame("write", "/repo/federation/controllers/writer.py")]): 1,
    }
)


def test_loop_samples_are_charged_to_their_phase_or_library() -> None:
    profile = Profile(STACKS)
    assert profile.parts(LOOP_PARTS) == [("core", 0.6), ("SQLAlchemy", 0.3), ("write-back", 0.1)]
    assert profile.parts()[0] == ("fail-fast check", 0.6)  # the API's rules read it otherwise


def test_the_section_gives_milliseconds_per_unit() -> None:
    text = markdown(Profile(STACKS), "Loop", 2.0, "decision", LOOP_PARTS)
    assert "2.00 ms of CPU per decision" in text and "| core | 60% | 1.20 |" in text
    assert "| `federation/scheduling/cycle.py:schedule` | 60% |" in text
