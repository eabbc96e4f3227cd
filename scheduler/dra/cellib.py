"""The Kubernetes CEL libraries a device selector may call, declared for cel-expr-python.

Upstream compiles selectors in the Kubernetes base environment
(apiserver/pkg/cel/environment/base.go) plus ``cel.bind``. cel-expr-python
brings CEL's standard library, the strings extension, ``cel.bind`` and
optional types; this module adds, with upstream's names, overload ids,
results and error messages:

* quantity (apiserver ``library.Quantity``): ``quantity``, ``isQuantity``,
  ``sign``, ``isGreaterThan``, ``isLessThan``, ``compareTo``,
  ``asApproximateFloat``, ``asInteger``, ``isInteger``, ``add``, ``sub``;
* semver (``library.SemverLib``, version 1): ``semver`` and ``isSemver`` with
  the optional ``normalize`` flag, ``isGreaterThan``, ``isLessThan``,
  ``compareTo``, ``major``, ``minor``, ``patch``;
* lists (``library.Lists``, version 0): ``isSorted``, ``sum``, ``min``,
  ``max``, for lists of int, double, bool, string and bytes (``sum``: int and
  double). Lists of uint, duration or timestamp have none of them here: the
  runtime below could not give their results the right type, so such a
  selector fails to compile rather than compute a wrong type.

Not here, so a selector using them fails to compile (``undeclared
reference`` or ``no matching overload``): the lists' ``indexOf`` and
``lastIndexOf`` (cel-expr-python refuses a second declaration of a function
its strings extension declares, and these are the strings' too), regex
``find``/``findAll`` (they need RE2; Python's ``re`` backtracks, which no cost
limit here would bound), ``url``, ``ip``, ``cidr``,
``format``, ``authz``, ``sets``, ``lists.*`` (ext.Lists), two-variable
comprehensions (a parser macro cel-expr-python does not offer), and the
list-type attributes' ``includes`` (alpha, DRAListTypeAttributes).

How the declarations meet cel-expr-python's runtime: the checker resolves an
overload by its declared types, but the runtime dispatches by function name
and argument *kinds*, and refuses two implementations with the same kinds.
Quantity and Semver are both of the message kind, so ``compareTo`` (and
friends) has one implementation that tells the two apart itself. A Python
result is converted to the declared result type of the overload carrying the
implementation, so ``sum``/``min``/``max``, whose result type follows the
element type, carry theirs on an extra overload over ``list(tandem.Opaque)``
(a type no expression produces) declared to return dyn.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable

from cel_expr_python import cel

from scheduler.dra.celvalues import (
    NANO, OPAQUE_TYPE, QUANTITY_TYPE, SEMVER_TYPE, ParseError, compare_versions, is_quantity, is_semver, nanos_of,
    parse_nanos, parse_semver, quantity, quantity_of, semver_of, version_of,
)

T = cel.Type
QUANTITY = T(QUANTITY_TYPE)
SEMVER = T(SEMVER_TYPE)
_OPAQUE = T(OPAQUE_TYPE)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class FunctionError(Exception):
    """A library function's runtime error; ``str()`` is what cel-go's library returns."""


NO_SUCH_OVERLOAD = "no such overload"


def _overload(oid: str, params: list[Any], result: Any, *, member: bool = False,
              impl: Callable[..., Any] | None = None) -> Any:
    return cel.Overload(oid, return_type=result, parameters=params, is_member=member, impl=impl)


# ---------------------------------------------------------------------------------------------- quantity

def _nanos(value: Any) -> int:
    if not is_quantity(value):
        raise FunctionError(NO_SUCH_OVERLOAD)
    return nanos_of(value)


def _compare(a: Any, b: Any) -> int:
    """compareTo for two Quantities or two Semvers: one runtime implementation serves both (one message kind)."""
    if is_quantity(a) and is_quantity(b):
        x, y = nanos_of(a), nanos_of(b)
        return (x > y) - (x < y)
    if is_semver(a) and is_semver(b):
        return compare_versions(version_of(a._v), version_of(b._v))
    raise FunctionError(NO_SUCH_OVERLOAD)


def _is_quantity_string(text: str) -> bool:
    try:
        parse_nanos(text)
    except ParseError:
        return False
    return True


def _sign(q: Any) -> int:
    nanos = _nanos(q)
    return (nanos > 0) - (nanos < 0)


def _as_integer(q: Any) -> int:
    nanos = _nanos(q)
    if nanos % NANO or not INT64_MIN <= nanos // NANO <= INT64_MAX:
        raise FunctionError("cannot convert value to integer")
    return nanos // NANO


def _is_integer(q: Any) -> bool:
    nanos = _nanos(q)
    return not nanos % NANO and INT64_MIN <= nanos // NANO <= INT64_MAX


def _plus(sign: int) -> Callable[[Any, Any], Any]:
    """add / sub of a Quantity and a Quantity or an int (an int counts whole units, as resource.NewQuantity)."""
    def op(q: Any, other: Any) -> Any:
        delta = other * NANO if isinstance(other, int) and not isinstance(other, bool) else _nanos(other)
        return quantity(_nanos(q) + sign * delta)
    return op


def _quantity_decls() -> list[Any]:
    q, i, b, d = QUANTITY, T.INT, T.BOOL, T.DOUBLE
    add, sub = _plus(1), _plus(-1)
    return [
        cel.FunctionDecl("quantity", [_overload("string_to_quantity", [T.STRING], q, impl=quantity_of)]),
        cel.FunctionDecl("isQuantity", [_overload("is_quantity_string", [T.STRING], b, impl=_is_quantity_string)]),
        cel.FunctionDecl("sign", [_overload("quantity_sign", [q], i, impl=_sign)]),
        cel.FunctionDecl("asApproximateFloat", [
            _overload("quantity_get_float", [q], d, member=True, impl=lambda x: float(Fraction(_nanos(x), NANO)))]),
        cel.FunctionDecl("asInteger", [_overload("quantity_get_int", [q], i, member=True, impl=_as_integer)]),
        cel.FunctionDecl("isInteger", [_overload("quantity_is_integer", [q], b, member=True, impl=_is_integer)]),
        cel.FunctionDecl("add", [_overload("quantity_add", [q, q], q, member=True, impl=add),
                                 _overload("quantity_add_int", [q, i], q, member=True, impl=add)]),
        cel.FunctionDecl("sub", [_overload("quantity_sub", [q, q], q, member=True, impl=sub),
                                 _overload("quantity_sub_int", [q, i], q, member=True, impl=sub)]),
    ]


# ---------------------------------------------------------------------------------------------- semver

def _version_part(index: int) -> Callable[[Any], int]:
    def part(v: Any) -> int:
        if not is_semver(v):
            raise FunctionError(NO_SUCH_OVERLOAD)
        return version_of(v._v)[index]     # type: ignore[return-value]
    return part


def _is_semver_string(text: str, normalize: bool = False) -> bool:
    try:
        parse_semver(text, normalize)
    except ParseError:
        return False
    return True


def _semver_decls() -> list[Any]:
    s, i, b, st = SEMVER, T.INT, T.BOOL, T.STRING
    return [
        cel.FunctionDecl("semver", [_overload("string_to_semver", [st], s, impl=semver_of),
                                    _overload("string_bool_to_semver", [st, b], s, impl=semver_of)]),
        cel.FunctionDecl("isSemver", [_overload("is_semver_string", [st], b, impl=_is_semver_string),
                                      _overload("is_semver_string_bool", [st, b], b, impl=_is_semver_string)]),
        cel.FunctionDecl("major", [_overload("semver_major", [s], i, member=True, impl=_version_part(0))]),
        cel.FunctionDecl("minor", [_overload("semver_minor", [s], i, member=True, impl=_version_part(1))]),
        cel.FunctionDecl("patch", [_overload("semver_patch", [s], i, member=True, impl=_version_part(2))]),
    ]


def _comparison_decls() -> list[Any]:
    """isGreaterThan, isLessThan and compareTo, on Quantity and on Semver; the Quantity overload carries the code.

    Selectors compiled by cel.py do not call these (celrewrite.py compares in CEL) but for a rewrite that
    did not compile; the two functions without arguments are the rewrite's ``no such overload``."""
    q, s = QUANTITY, SEMVER
    return [cel.FunctionDecl(name, [_overload(f"quantity_{snake}", [q, q], result, member=True, impl=impl),
                                    _overload(f"semver_{snake}", [s, s], result, member=True)])
            for name, snake, result, impl in (
                ("isGreaterThan", "is_greater_than", T.BOOL, lambda a, b: _compare(a, b) > 0),
                ("isLessThan", "is_less_than", T.BOOL, lambda a, b: _compare(a, b) < 0),
                ("compareTo", "compare_to", T.INT, _compare))] + [
        cel.FunctionDecl(name, [_overload(name, [], result, impl=_no_such_overload)])
        for name, result in (("tandem.noSuchOverloadInt", T.INT), ("tandem.noSuchOverloadBool", T.BOOL))]


def _no_such_overload() -> Any:
    raise FunctionError(NO_SUCH_OVERLOAD)


# ---------------------------------------------------------------------------------------------- lists

_COMPARABLE = {"int": T.INT, "double": T.DOUBLE, "bool": T.BOOL, "string": T.STRING, "bytes": T.BYTES}
_SUMMABLE = {"int": T.INT, "double": T.DOUBLE}


def _is_sorted(items: list[Any]) -> bool:
    try:
        return all(not b < a for a, b in zip(items, items[1:]))
    except TypeError:
        raise FunctionError(NO_SUCH_OVERLOAD) from None


def _sum(items: list[Any]) -> Any:
    total: Any = 0
    try:
        for x in items:
            total = total + x
    except TypeError:
        raise FunctionError(NO_SUCH_OVERLOAD) from None
    if isinstance(total, int) and not INT64_MIN <= total <= INT64_MAX:
        raise FunctionError("integer overflow")
    return total


def _extreme(name: str, pick: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    def op(items: list[Any]) -> Any:
        if not items:
            raise FunctionError(f"{name} called on empty list")
        try:
            return pick(items)
        except TypeError:
            raise FunctionError(NO_SUCH_OVERLOAD) from None
    return op


def _carrier(name: str, impl: Callable[..., Any]) -> Any:
    return _overload(f"list_tandem_opaque_{name}_dyn", [T.List(_OPAQUE)], T.DYN, member=True, impl=impl)


def _list_decls() -> list[Any]:
    # every isSorted returns bool, so the first overload carries the code for all (one runtime kind: list)
    decls = [cel.FunctionDecl("isSorted", [
        _overload(f"list_{tn}_is_sorted_bool", [T.List(t)], T.BOOL, member=True, impl=None if k else _is_sorted)
        for k, (tn, t) in enumerate(_COMPARABLE.items())])]
    for name, types, impl in (("sum", _SUMMABLE, _sum), ("min", _COMPARABLE, _extreme("min", min)),
                              ("max", _COMPARABLE, _extreme("max", max))):
        typed = [_overload(f"list_{tn}_{name}_{tn}", [T.List(t)], t, member=True) for tn, t in types.items()]
        decls.append(cel.FunctionDecl(name, [*typed, _carrier(name, impl)]))
    return decls


def declarations() -> list[Any]:
    """Every function this module adds, for ``cel.NewEnv(functions=...)``."""
    return [*_quantity_decls(), *_semver_decls(), *_comparison_decls(), *_list_decls()]
