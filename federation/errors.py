"""Domain errors: each carries what the API needs for an RFC 7807 problem document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FieldError:
    """One invalid field: where (a dotted path like `spec.tasks[0].replicas`) and what is wrong."""

    path: str
    message: str
    expected: str = ""

    def as_dict(self) -> dict[str, str]:
        """JSON form used in problem documents."""
        out = {"path": self.path, "message": self.message}
        if self.expected:
            out["expected"] = self.expected
        return out


@dataclass
class SuanpanError(Exception):
    """Base of errors that map to a problem document."""

    detail: str
    status: int = 500
    title: str = "Internal error"
    kind: str = "internal"
    errors: list[FieldError] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.detail


class NotFound(SuanpanError):
    """The resource does not exist, or the caller may not see it."""

    def __init__(self, what: str, name: str) -> None:
        super().__init__(f"{what} {name!r} not found", 404, "Not found", "not-found")


class Conflict(SuanpanError):
    """The request conflicts with the current state."""

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail, 409, "Conflict", "conflict", extra=extra)


class InvalidInput(SuanpanError):
    """The request is malformed; `errors` names each bad field."""

    def __init__(self, detail: str, errors: list[FieldError] | None = None) -> None:
        super().__init__(detail, 422, "Invalid input", "invalid-input", errors or [])


class Forbidden(SuanpanError):
    """The caller's role may not do this."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail, 403, "Forbidden", "forbidden")


class Unauthorized(SuanpanError):
    """No valid credentials."""

    def __init__(self, detail: str = "a valid bearer token is required") -> None:
        super().__init__(detail, 401, "Unauthorized", "unauthorized")


class Unrunnable(SuanpanError):
    """No cluster of the fleet could ever run the job, even empty (fail fast)."""

    def __init__(self, reasons: dict[str, str], job: str) -> None:
        detail = "; ".join(f"{c}: {r}" for c, r in sorted(reasons.items()))
        super().__init__(
            f"job {job!r} can never run in this fleet: {detail}",
            422,
            "Unschedulable",
            "unschedulable",
            extra={"clusters": reasons},
        )


class IllegalTransition(SuanpanError):
    """A lifecycle transition that the transition table does not allow."""

    def __init__(self, kind: str, current: str, target: str) -> None:
        super().__init__(
            f"{kind} cannot go from {current} to {target}",
            409,
            "Illegal state transition",
            "illegal-transition",
            extra={"from": current, "to": target},
        )
