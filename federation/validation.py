"""Constraints shared by every model that reads outside input (manifests, API bodies, agents).

What is stored must be what PostgreSQL and Kubernetes accept: no NUL (U+0000) in any string
(neither `text` nor `jsonb` can hold it) and no integer beyond the column it lands in.
Patterns given to pydantic run on Rust's regex engine, where `$` matches only at the very end
(a trailing newline does not pass); Python patterns use `fullmatch`.
"""

from __future__ import annotations

from pydantic import StringConstraints

NUL_FREE_PATTERN = r"^[^\x00]*$"
NUL_FREE = StringConstraints(pattern=NUL_FREE_PATTERN)
"""Metadata for a stored string: `Annotated[str, StringConstraints(max_length=n), NUL_FREE]`."""

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def field_path(loc: tuple[int | str, ...]) -> str:
    """A field's location as problem documents name it: `spec.tasks[0].image`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
