"""Kubernetes' two CEL value types, Quantity and Semver, in a form cel-expr-python can carry.

cel-expr-python hands values to CEL only as CEL's own types or as protobuf
messages; any other Python object is refused. So a Quantity and a Semver are
messages of a private descriptor pool, named as upstream names the types
(``kubernetes.Quantity``, ``kubernetes.Semver``, so ``type(q)`` reads the
same), with two string fields, both canonical, so that CEL's message equality
is upstream's ``Quantity.Equal`` (quantities equal by value, ``1Gi`` and
``1024Mi``, are equal) and blang/semver's ``EQ`` (build metadata ignored):

* ``_v``, the value for Python: a Quantity's exact value in nano units, a
  decimal integer; a Semver's ``major.minor.patch[-prerelease]``;
* ``_k``, a key whose string order is the values' order, so that
  ``compareTo``, ``isGreaterThan`` and ``isLessThan`` run as CEL's own string
  comparisons (celrewrite.py rewrites them so) and never call into Python:
  cel-expr-python 0.1.3 leaks every Python call's arguments.

The fields are the one way these values differ from upstream's opaque ones: a
selector could read or construct them; none written for Kubernetes does.

Parsing follows apimachinery's ``resource.ParseQuantity`` (values rounded away
from zero to a nano, binary-suffixed ones capped at 2^63-1) and blang/semver
v4's ``Parse`` (strict, no ``v`` prefix), and fails with their messages, which
cel-go's libraries return as the runtime error.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from scheduler.model.quantity import QuantityError, parse_quantity

QUANTITY_TYPE = "kubernetes.Quantity"
SEMVER_TYPE = "kubernetes.Semver"

# apimachinery's resource package errors, word for word
ERR_FORMAT_WRONG = ("quantities must match the regular expression "
                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

NANO = 10**9
INT64_MAX = 2**63 - 1


def _build_pool() -> descriptor_pool.DescriptorPool:
    kube = descriptor_pb2.FileDescriptorProto(name="tandem/dra/kubernetes.proto", package="kubernetes", syntax="proto3")
    for name in ("Quantity", "Semver"):
        message = kube.message_type.add(name=name)
        for number, field in enumerate(("_v", "_k"), start=1):
            message.field.add(name=field, number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                              label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    # a type no selector has a reason to build: it only carries runtime code (cellib's "carrier" overloads)
    ours = descriptor_pb2.FileDescriptorProto(name="tandem/dra/tandem.proto", package="tandem", syntax="proto3")
    ours.message_type.add(name="Opaque")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(kube)
    pool.Add(ours)
    return pool


POOL = _build_pool()
OPAQUE_TYPE = "tandem.Opaque"
QuantityMessage: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName(QUANTITY_TYPE))
SemverMessage: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName(SEMVER_TYPE))


class ParseError(ValueError):
    """A quantity or version that does not parse; ``str()`` is upstream's message."""


# ---------------------------------------------------------------------------------------------- Quantity

_BINARY_SUFFIX = re.compile(r"[KMGTPE]i$")


def parse_nanos(text: str) -> int:
    """A quantity string as an exact count of nano units, as ``resource.ParseQuantity`` reads it."""
    if not text or text != text.strip():   # ParseQuantity trims nothing
        raise ParseError(ERR_FORMAT_WRONG)
    try:
        value = Fraction(parse_quantity(text))
    except QuantityError as err:       # the model's messages name the value; upstream's do not
        why = str(err)
        raise ParseError(ERR_SUFFIX if "suffix" in why else ERR_FORMAT_WRONG if "regular expression" in why
                         else ERR_NUMERIC) from None
    magnitude = abs(value) * NANO
    nanos = -(-magnitude.numerator // magnitude.denominator)     # up to a whole nano, away from zero
    if _BINARY_SUFFIX.search(text) and nanos > INT64_MAX * NANO:
        nanos = INT64_MAX * NANO                                  # "the max is just a simple cap" (BinarySI only)
    return -nanos if value < 0 else nanos


def quantity_key(nanos: int) -> str:
    """Digits whose string order is the quantities' order: a sign class, then the length, then the digits
    (a negative one's length and digits complemented, so a larger magnitude sorts first)."""
    if nanos == 0:
        return "1"
    digits = str(abs(nanos))
    if nanos > 0:
        return f"2{len(digits):04d}{digits}"
    return f"0{9999 - len(digits):04d}" + digits.translate(_COMPLEMENT)


_COMPLEMENT = str.maketrans("0123456789", "9876543210")


def quantity(nanos: int) -> Any:
    return QuantityMessage(_v=str(nanos), _k=quantity_key(nanos))


def quantity_of(text: str) -> Any:
    return quantity(parse_nanos(text))


def nanos_of(message: Any) -> int:
    return int(message._v)


def is_quantity(value: Any) -> bool:
    return isinstance(value, QuantityMessage)


# ---------------------------------------------------------------------------------------------- Semver

Version = tuple[int, int, int, tuple[int | str, ...]]   # major, minor, patch, prerelease identifiers

_DIGITS = frozenset("0123456789")
_ALNUM = _DIGITS | frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
_UINT64_MAX = 2**64 - 1


def _number(part: str, what: str) -> int:
    if not set(part) <= _DIGITS:
        raise ParseError(f"Invalid character(s) found in {what} number {_quote(part)}")
    if len(part) > 1 and part[0] == "0":
        raise ParseError(f"{what.capitalize()} number must not contain leading zeroes {_quote(part)}")
    if not part or int(part) > _UINT64_MAX:
        why = "invalid syntax" if not part else "value out of range"
        raise ParseError(f"strconv.ParseUint: parsing {_quote(part)}: {why}")
    return int(part)


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_semver(text: str, normalize: bool = False) -> Version:
    """blang/semver v4 ``Parse``; with ``normalize``, upstream's ``normalizeAndParse`` first."""
    if normalize:
        text = _normalize(text)
    if not text:
        raise ParseError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ParseError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    rest, pre, build = parts[2], None, None
    if "+" in rest:
        rest, build = rest.split("+", 1)
    if "-" in rest:
        rest, pre = rest.split("-", 1)
    patch = _number(rest, "patch")
    prerelease = tuple(_prerelease(ident) for ident in pre.split(".")) if pre is not None else ()
    for ident in build.split(".") if build is not None else ():
        if not ident:
            raise ParseError("Build meta data is empty")
        if not set(ident) <= _ALNUM:
            raise ParseError(f"Invalid character(s) found in build meta data {_quote(ident)}")
    return major, minor, patch, prerelease


def _prerelease(ident: str) -> int | str:
    if not ident:
        raise ParseError("Prerelease is empty")
    if set(ident) <= _DIGITS:
        if len(ident) > 1 and ident[0] == "0":
            raise ParseError(f"Numeric PreRelease version must not contain leading zeroes {_quote(ident)}")
        return int(ident)
    if not set(ident) <= _ALNUM:
        raise ParseError(f"Invalid character(s) found in prerelease {_quote(ident)}")
    return ident


def _normalize(text: str) -> str:
    """Upstream's normalizeAndParse before the parse: no "v", no leading zeros, missing parts are 0."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in _DIGITS:
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ParseError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def canonical_semver(version: Version) -> str:
    major, minor, patch, pre = version
    core = f"{major}.{minor}.{patch}"
    return core + "-" + ".".join(str(p) for p in pre) if pre else core


def semver_key(version: Version) -> str:
    """A string whose order is blang/semver's: fixed-width numbers, a release (``~``) above its prereleases
    (``-``), numeric identifiers (``0`` and 20 digits) below alphanumeric ones (``1`` and the text), ``!``
    between identifiers, lower than any character an identifier holds, so that fewer identifiers sort first."""
    major, minor, patch, pre = version
    core = f"{major:020d}.{minor:020d}.{patch:020d}"
    if not pre:
        return core + "~"
    return core + "-" + "!".join(f"0{p:020d}" if isinstance(p, int) else f"1{p}" for p in pre)


def semver(version: Version) -> Any:
    return SemverMessage(_v=canonical_semver(version), _k=semver_key(version))


def semver_of(text: str, normalize: bool = False) -> Any:
    return semver(parse_semver(text, normalize))


@functools.lru_cache(maxsize=4096)
def version_of(canonical: str) -> Version:
    return parse_semver(canonical)


def compare_versions(a: Version, b: Version) -> int:
    """blang/semver ``Compare``: numbers, then a release above its prereleases, then prerelease identifiers."""
    if a[:3] != b[:3]:
        return -1 if a[:3] < b[:3] else 1
    pa, pb = a[3], b[3]
    if not pa or not pb:
        return (not pa) - (not pb)
    for x, y in zip(pa, pb):
        if x == y:
            continue
        if isinstance(x, int) != isinstance(y, int):
            return -1 if isinstance(x, int) else 1     # numeric identifiers sort below alphanumeric ones
        return -1 if x < y else 1                       # type: ignore[operator]
    return (len(pa) > len(pb)) - (len(pa) < len(pb))


def is_semver(value: Any) -> bool:
    return isinstance(value, SemverMessage)
