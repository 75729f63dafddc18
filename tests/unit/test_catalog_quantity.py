"""Kubernetes quantity parsing."""

from __future__ import annotations

from decimal import Decimal

import pytest

from federation.catalog.quantity import parse_count, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8", Decimal(8)),
        ("0", Decimal(0)),
        ("500m", Decimal("0.5")),
        ("1k", Decimal(1000)),
        ("16Gi", Decimal(16 * 1024**3)),
        ("1Ki", Decimal(1024)),
        ("2Mi", Decimal(2 * 1024**2)),
        ("1.5G", Decimal("1.5e9")),
        ("1e3", Decimal(1000)),
        ("1E-3", Decimal("0.001")),
        ("250u", Decimal("0.00025")),
        ("100n", Decimal("1e-7")),
        (".5", Decimal("0.5")),
        ("+3", Decimal(3)),
        ("-2", Decimal(-2)),
        ("5.", Decimal(5)),
        ("1E", Decimal("1e18")),
        ("1E3", Decimal(1000)),
        ("1Ei", Decimal(1024**6)),
        ("3P", Decimal("3e15")),
    ],
)
def test_parse_quantity(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    [
        *("", "abc", "1.2.3", "5 Gi", "1KiB", "Gi", "1e", "m", "1ki", ".", "+", "1e1.5", "1e+"),
        # Kubernetes' grammar is ASCII and has no room for space
        *(" 4 ", " 4", "4 ", "4\n", "\t4", "4\x00", "1Gi\n"),
        *("１６", "１６Gi", "٣", "४Mi", "1e١"),
    ],
)
def test_parse_quantity_rejects_malformed(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(("text", "count"), [("8", 8), ("2000m", 2), ("1k", 1000), ("0", 0)])
def test_parse_count(text: str, count: int) -> None:
    assert parse_count(text) == count


@pytest.mark.parametrize("text", ["500m", "-1", "1.5"])
def test_parse_count_rejects_fractions_and_negatives(text: str) -> None:
    with pytest.raises(ValueError, match="not a whole, non-negative count"):
        parse_count(text)


@pytest.mark.parametrize("text", ["1e1001", "1e-1001", "5E99999999999999999999"])
def test_parse_quantity_rejects_exponents_beyond_any_resource(text: str) -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_quantity(text)
