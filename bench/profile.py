"""Where a running process spends its CPU: py-spy samples, summed by what each sample was doing.

`Sampler` records the on-CPU stacks of processes (py-spy attaches from outside, so the hub
runs unchanged); `summary` charges each sample to the first frame, from the leaf up, that a
`PARTS` rule names (the library or hub module doing the work), and lists the hub's own
functions by the share of samples they are on the stack of.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

RATE_HZ = 250
HUB_FRAME = re.compile(r"\((?:[^()]*/)?((?:api|federation)/[^():]+):\d+\)$")
# (part, what a frame's file path contains), tried in order from the leaf up
Parts = tuple[tuple[str, tuple[str, ...]], ...]
PARTS: Parts = (
    ("auth and rate limits", ("api/auth.py", "api/ratelimit.py", "api/oidc.py")),
    ("audit", ("api/audit.py", "store/audit.py")),
    ("fail-fast check", ("api/feasibility.py", "federation/scheduling/")),
    ("compile", ("federation/compiler.py", "federation/compiled.py", "federation/catalog")),
    ("pydantic", ("pydantic",)),
    ("JSON", ("/json/", "orjson")),
    ("SQLAlchemy", ("sqlalchemy",)),
    ("asyncpg", ("asyncpg",)),
    ("aiohttp", ("aiohttp", "multidict", "yarl")),
    ("event loop", ("asyncio/", "uvloop", "selectors.py")),
    ("group commit", ("store/group_commit.py",)),
    ("hub other", ("api/", "federation/")),
)
# the scheduling loop's process: its phases (store reads and writes by the library doing them)
LOOP_PARTS: Parts = (
    ("core", ("federation/scheduling/",)),
    ("compiled jobs", ("federation/compiled.py", "federation/compiler.py", "federation/catalog")),
    ("pydantic", ("pydantic",)),
    ("JSON", ("/json/", "orjson")),
    ("SQLAlchemy", ("sqlalchemy",)),
    ("asyncpg", ("asyncpg",)),
    ("snapshot", ("controllers/snapshot.py", "controllers/row_stamps.py")),
    ("write-back", ("controllers/writer.py", "store/lifecycle.py", "store/events.py")),
    ("event loop", ("asyncio/", "uvloop", "selectors.py")),
    ("hub other", ("api/", "federation/")),
)


def available() -> bool:
    """Whether py-spy is installed beside this interpreter (a dev dependency)."""
    return _binary() is not None


def _binary() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@dataclass
class Profile:
    """Collapsed stacks (`frame;frame;...;leaf` -> samples) of some processes."""

    stacks: Counter[str]

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    def parts(self, rules: Parts = PARTS) -> list[tuple[str, float]]:
        """Share of samples per part (see `PARTS`), largest first."""
        counts: Counter[str] = Counter()
        for stack, n in self.stacks.items():
            counts[_part(stack.split(";"), rules)] += n
        total = max(self.samples, 1)
        return [(part, n / total) for part, n in counts.most_common()]

    def hub_functions(self, top: int = 12) -> list[tuple[str, float]]:
        """The hub's functions (api/, federation/) by share of samples with them on the stack."""
        counts: Counter[str] = Counter()
        for stack, n in self.stacks.items():
            seen = {_name(frame) for frame in stack.split(";") if HUB_FRAME.search(frame)}
            for name in seen:
                counts[name] += n
        total = max(self.samples, 1)
        return [(name, n / total) for name, n in counts.most_common(top)]


def _part(frames: list[str], rules: Parts) -> str:
    for frame in reversed(frames):
        for part, needles in rules:
            if any(needle in frame for needle in needles):
                return part
    return "other (interpreter, sockets, logging)"


def _name(frame: str) -> str:
    """`function (path/to/api/x.py:12)` -> `api/x.py:function`."""
    function = frame.partition(" (")[0]
    found = HUB_FRAME.search(frame)
    assert found is not None
    return f"{found.group(1)}:{function}"


class Sampler:
    """py-spy recording `pids` for a while, in the background."""

    def __init__(self, pids: list[int], seconds: float) -> None:
        self.pids = pids
        self.seconds = seconds
        self._dir = tempfile.TemporaryDirectory(prefix="suanpan-profile-")
        self._procs: list[asyncio.subprocess.Process] = []

    async def start(self) -> None:
        """Attach to every process (py-spy needs ptrace: root or CAP_SYS_PTRACE)."""
        binary = _binary()
        assert binary is not None
        for pid in self.pids:
            self._procs.append(
                await asyncio.create_subprocess_exec(
                    *(binary, "record", "--pid", str(pid), "--rate", str(RATE_HZ)),
                    *("--duration", str(max(1, round(self.seconds))), "--format", "raw"),
                    *("--output", str(Path(self._dir.name) / f"{pid}.txt"), "--nonblocking"),
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                )
            )

    async def result(self) -> Profile:
        """Wait for the recordings and read them."""
        for proc in self._procs:
            await proc.wait()
        found = _read(Path(self._dir.name))
        self._dir.cleanup()
        return found


def _read(folder: Path) -> Profile:
    """The profile of every recording in `folder`."""
    stacks: Counter[str] = Counter()
    for path in folder.glob("*.txt"):
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                stacks[stack] += int(count)
    return Profile(stacks)


def markdown(
    profile: Profile, title: str, cpu_ms: float, unit: str = "submission", rules: Parts = PARTS
) -> str:
    """A report section: `cpu_ms` of CPU per `unit` divided by part, and the hub's functions."""
    lines = [
        f"### {title}",
        "",
        f"{profile.samples} py-spy samples; {cpu_ms:.2f} ms of CPU per {unit}.",
        "",
        f"| part | share | ms per {unit} |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {p} | {s:.0%} | {s * cpu_ms:.2f} |" for p, s in profile.parts(rules)]
    lines += ["", "| hub function (on the stack) | share |", "| --- | ---: |"]
    lines += [f"| `{name}` | {share:.0%} |" for name, share in profile.hub_functions()]
    return "\n".join(lines) + "\n"
