"""Quota: nominal, cohort borrowing up to the borrowing limit, and dominant shares."""

from __future__ import annotations

import pytest

from federation.scheduling.quota import QuotaLedger
from federation.scheduling.status import Code

from .builders import H100, queue

LEDGER_QUEUES = [
    queue("solo", {H100: 8000}),
    queue("a", {H100: 8000, "cpu": 64_000}, cohort="c", weight=2.0),
    queue("b", {H100: (8000, 4000)}, cohort="c"),
    queue("free"),
]

# (case, queue, usage before {queue: {resource: amount}}, request, expected code, reason part)
QUOTA_TABLE = [
    ("within nominal", "solo", {}, {H100: 8000}, Code.SUCCESS, ""),
    (
        "over nominal without cohort",
        "solo",
        {"solo": {H100: 4000}},
        {H100: 5000},
        Code.UNSCHEDULABLE,
        "uses 4000 of nominal 8000",
    ),
    ("never within nominal", "solo", {}, {H100: 9000}, Code.UNRESOLVABLE, "nominal quota 8000"),
    ("borrow from the cohort", "b", {}, {H100: 12_000}, Code.SUCCESS, ""),
    (
        "borrowing limit",
        "b",
        {"b": {H100: 8000}},
        {H100: 5000},
        Code.UNSCHEDULABLE,
        "borrowing limit reached at 12000",
    ),
    (
        "beyond nominal plus limit",
        "b",
        {},
        {H100: 13_000},
        Code.UNRESOLVABLE,
        "borrowing up to 12000",
    ),
    (
        "cohort lent out",
        "a",
        {"b": {H100: 12_000}},
        {H100: 5000},
        Code.UNSCHEDULABLE,
        "4000 of 16000 unused",
    ),
    ("unlimited borrowing up to the cohort", "a", {}, {H100: 16_000}, Code.SUCCESS, ""),
    ("ungoverned resource", "free", {}, {H100: 10**9}, Code.SUCCESS, ""),
    (
        "zero demand of a governed resource",
        "solo",
        {"solo": {H100: 8000}},
        {H100: 0},
        Code.SUCCESS,
        "",
    ),
]


@pytest.mark.parametrize(
    ("queue_name", "usage", "request_", "code", "reason"),
    [case[1:] for case in QUOTA_TABLE],
    ids=[case[0] for case in QUOTA_TABLE],
)
def test_quota_check(
    queue_name: str,
    usage: dict[str, dict[str, int]],
    request_: dict[str, int],
    code: Code,
    reason: str,
) -> None:
    ledger = QuotaLedger(LEDGER_QUEUES)
    for q, amounts in usage.items():
        ledger.charge(q, amounts)
    status = ledger.check(queue_name, request_)
    assert status.code is code, status.reason
    assert reason in status.reason


def test_charge_and_refund_are_inverse_and_feed_dominant_share() -> None:
    ledger = QuotaLedger(LEDGER_QUEUES)
    ledger.charge("a", {H100: 8000, "cpu": 8_000})
    assert ledger.dominant_share("a") == pytest.approx(8000 / 16_000 / 2.0)  # weight 2
    assert ledger.borrows("a", H100) is False
    ledger.charge("a", {H100: 1000})
    assert ledger.borrows("a", H100) is True
    ledger.charge("a", {H100: 9000, "cpu": 8_000}, -1)
    assert ledger.usage["a"] == {H100: 0, "cpu": 0}
    assert ledger.cohort_usage["c"] == {H100: 0, "cpu": 0}
