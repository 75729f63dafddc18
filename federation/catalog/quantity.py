"""Kubernetes resource quantities ("8", "500m", "16Gi", "1k", "1e3") as exact decimals.

The grammar is Kubernetes' own (`k8s.io/apimachinery/pkg/api/resource`), ASCII only, with no
surrounding space: `[+-]? (digits | digits "." digits? | "." digits)` followed by one suffix,
binary (`Ki Mi Gi Ti Pi Ei`), decimal (`n u m "" k M G T P E`) or an exponent (`e`/`E` and
a signed integer).
"""

from __future__ import annotations

import re
from decimal import Decimal

_QUANTITY = re.compile(
    r"""(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))
        (?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)
          |(?P<exponent>[eE][+-]?[0-9]+)
          |(?P<decimal>[numkMGTPE]?))""",
    re.VERBOSE | re.ASCII,
)
MAX_EXPONENT = 1000  # far beyond any resource, well within what Decimal represents exactly
_BINARY = {s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def parse_quantity(text: str) -> Decimal:
    """The exact value of a Kubernetes quantity; raises ValueError when malformed."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number = Decimal(match["number"])
    if match["binary"]:
        return number * _BINARY[match["binary"]]
    if match["exponent"]:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > MAX_EXPONENT:
            raise ValueError(f"quantity out of range: {text!r}")
        return number.scaleb(exponent)
    return number * _DECIMAL[match["decimal"]]


def parse_count(text: str) -> int:
    """A whole, non-negative count such as an extended resource ("8", "2000m" -> 2).

    Raises ValueError for fractions ("500m") and negative values: extended resources are
    integers in Kubernetes.
    """
    value = parse_quantity(text)
    if value < 0 or value != value.to_integral_value():
        raise ValueError(f"not a whole, non-negative count: {text!r}")
    return int(value)
