"""Resource names and Kubernetes quantities, in the scheduler's units.

Units: cpu in millicores, every other resource in its base unit (bytes,
count), as integers rounded up, as the scheduler's framework.Resource does.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from scheduler.model.fields import _d, _Problems

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# upstream's defaults for scoring containers that request nothing (schedutil.DefaultMilliCPURequest / DefaultMemoryRequest)
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1      # maxSkew, minDomains and weights are int32 in the API


class QuantityError(ValueError):
    pass


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1, "k": 10**3,
            "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QTY_RE = re.compile(r"([+-]?)([0-9]+|(?=\.[0-9]))(?:\.([0-9]*))?([a-zA-Z]{0,2})")  # ".5" is valid, "." is not
_QTY_EXP_RE = re.compile(r"([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)[eE]([+-]?[0-9]+)")
_qty_cache: dict[str, Fraction | int] = {}


def parse_quantity(value: Any) -> Fraction | int:
    """A Kubernetes quantity ("100m", "2Gi", "1.5", "1e3", or a JSON number) as an exact number."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be strings or numbers, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):  # json.loads accepts NaN and Infinity
            raise QuantityError(f"quantities must be finite numbers, got {value!r}")
        return Fraction(value).limit_denominator(10**9)
    if not isinstance(value, str):
        raise QuantityError(f"quantities must be strings or numbers, got {type(value).__name__}")
    hit = _qty_cache.get(value)
    if hit is not None:
        return hit
    s = value.strip()
    m = _QTY_RE.fullmatch(s)
    if m:
        sign, whole, frac, suffix = m.groups()
        if suffix in _BINARY:
            mult: Fraction | int = _BINARY[suffix]
        elif suffix in _DECIMAL:
            mult = _DECIMAL[suffix]
        else:
            raise QuantityError(f"unable to parse quantity's suffix in {value!r}")
        num: Fraction | int = int(whole or 0)
        if frac:
            num = num + Fraction(int(frac), 10 ** len(frac))
        out = num * mult
    else:
        m = _QTY_EXP_RE.fullmatch(s)
        if not m:
            raise QuantityError(f"quantities must match the regular expression "
                                f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {value!r}")
        exp = int(m.group(2))
        if abs(exp) > 30:
            raise QuantityError(f"quantity {value!r} is out of range")
        out = Fraction(m.group(1)) * Fraction(10) ** exp
        sign = ""  # the mantissa carries its own sign (negating again turned "-1e3" into 1000)
    if sign == "-":
        out = -out
    if isinstance(out, Fraction) and out.denominator == 1:
        out = int(out)
    if len(_qty_cache) < 4096:
        _qty_cache[value] = out
    return out


def _ceil(x: Fraction | int) -> int:
    if isinstance(x, int):
        return x
    return -((-x.numerator) // x.denominator)


_canonical_cache: dict[tuple[str, str], int] = {}


def canonical(resource: str, value: Any) -> int:
    """A quantity in the scheduler's unit for ``resource``: millicores for cpu, base units otherwise.

    String quantities are memoized per (resource, text): a burst of pods repeats a handful of values,
    and the exact Fraction arithmetic below is most of the cost of parsing a pod.
    """
    if isinstance(value, str):
        hit = _canonical_cache.get((resource, value))
        if hit is not None:
            return hit
        out = _canonical(resource, value)
        if len(_canonical_cache) < 4096:
            _canonical_cache[resource, value] = out
        return out
    return _canonical(resource, value)


def _canonical(resource: str, value: Any) -> int:
    q = parse_quantity(value)
    if q < 0:
        raise QuantityError(f"must be greater than or equal to 0, got {value!r}")
    out = _ceil(q * 1000) if resource == CPU else _ceil(q)
    if out > INT64_MAX:  # the node table is int64 (upstream's framework.Resource too)
        raise QuantityError(f"quantity {value!r} is too large")
    return out


def _resource_list(v: Any, path: str, probs: _Problems) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, q in _d(v).items():
        try:
            out[name] = canonical(name, q)
        except QuantityError as exc:
            probs.add(f"{path}[{name}]", str(exc))
    return out
