"""Label and field selectors, parsed and matched the way kube-apiserver does.

Every list and watch call of the simulated cluster filters through these, so
two things matter: a client must not be able to tell them from the real ones
(same grammar, same matches, same 400 BadRequest wording), and matching must be
cheap, because a list call runs a selector over tens of thousands of objects.

What mirrors what upstream:

* :func:`parse_label_selector` is ``labels.Parse`` (k8s.io/apimachinery
  ``pkg/labels/selector.go``): the same lexer (whitespace, greedy ``==``/``!=``,
  ``in``/``notin`` keywords that turn back into identifiers in value
  position), the same recursive-descent parser and the same error strings,
  including the ``<nil>:`` field path that ``field.Invalid`` prints for a nil
  path and the ``values[0][key]`` path of a bad value.
* :func:`label_selector_from_object` is ``metav1.LabelSelectorAsSelector``:
  ``None`` selects nothing, ``{}`` selects everything.
* :func:`parse_field_selector` is ``fields.ParseSelector`` followed by the
  per-kind ``Transform`` that rejects unknown fields with
  ``field label not supported: <field>``.

Parsing happens once per request; matching happens per object. Selectors are
therefore compiled into small immutable callables, with dedicated shapes for
"everything", "nothing" and the single ``k=v`` case so that the common path is
one ``dict.get`` and a string compare.

This module does no I/O and must stay free of anything asynchronous.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Mapping

from bench.simcluster import names

__all__ = [
    "SelectorError",
    "Requirement",
    "LabelSelector",
    "FieldSelector",
    "EVERYTHING",
    "NOTHING",
    "EVERYTHING_FIELDS",
    "parse_label_selector",
    "parse_field_selector",
    "label_selector_from_object",
]


class SelectorError(ValueError):
    """A selector kube-apiserver would refuse.

    ``str(err)`` (also ``err.message``) is exactly the ``message`` of the 400
    BadRequest Status the real server answers with.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# Operator spellings are selection.Operator's string values.
IN = "in"
NOT_IN = "notin"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
GREATER_THAN = "gt"
LESS_THAN = "lt"
EXISTS = "exists"
DOES_NOT_EXIST = "!"

_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key <operator> values`` term of a label selector.

    ``values`` is sorted and de-duplicated when the requirement came from the
    string syntax (upstream builds it from a ``sets.String``) and kept in the
    given order when it came from a ``metav1.LabelSelector``.
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __str__(self) -> str:
        # Requirement.String(): "!k", "k", "k=v", "k in (a,b)" with values sorted.
        op = self.operator
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        if op == EXISTS:
            return self.key
        vals = ",".join(sorted(self.values)) if len(self.values) > 1 else "".join(self.values)
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({vals})"
        spelled = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{spelled}{vals}"


# --------------------------------------------------------------------------
# Validation with apimachinery's wording (util/validation: IsQualifiedName,
# IsValidLabelValue, IsDNS1123Subdomain; util/validation/field: Error).

def _go_quote(s: str) -> str:
    """strconv.Quote, close enough for anything a query string can carry."""
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            cp = ord(ch)
            if cp < 0x80:
                out.append(f"\\x{cp:02x}")
            elif cp < 0x10000:
                out.append(f"\\u{cp:04x}")
            else:
                out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _go_json(value: object) -> str:
    # encoding/json escapes <, > and & by default; a nil slice marshals to null.
    if value is None or value == []:
        return "null"
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _field_invalid(path: str, bad: object, detail: str) -> str:
    # field.Invalid(...).Error(): "<path>: Invalid value: <bad>: <detail>"
    shown = _go_quote(bad) if isinstance(bad, str) else _go_json(bad)
    return f"{path}: Invalid value: {shown}: {detail}"


def _aggregate(messages: list[str]) -> str | None:
    # ErrorList.ToAggregate() de-duplicates; Aggregate.Error() brackets more than one.
    unique = list(dict.fromkeys(messages))
    if not unique:
        return None
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


_INT_RE = re.compile(r"[+-]?[0-9]+")


def _parse_int64(s: str | None) -> int | None:
    """strconv.ParseInt(s, 10, 64), or None where Go returns an error."""
    if s is None or not _INT_RE.fullmatch(s):
        return None
    n = int(s)
    if n < -(1 << 63) or n >= (1 << 63):
        return None
    return n


def _new_requirement(key: str, op: str, values: list[str], path: str | None) -> Requirement:
    """labels.NewRequirement: validate and build, or raise with the aggregate message.

    ``path`` is the field path prefix; ``None`` is what the string parser and
    LabelSelectorAsSelector pass (a nil ``*field.Path``).
    """
    def child(name: str) -> str:
        return name if path is None else f"{path}.{name}"

    errs: list[str] = []
    key_errs = names.is_qualified_name(key)
    if key_errs:
        errs.append(_field_invalid(child("key"), key, "; ".join(key_errs)))
    values_path = child("values")
    if op in (IN, NOT_IN):
        if not values:
            errs.append(_field_invalid(values_path, values, "for 'in', 'notin' operators, values set can't be empty"))
    elif op in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(values) != 1:
            errs.append(_field_invalid(values_path, values, "exact-match compatibility requires one single value"))
    elif op in (EXISTS, DOES_NOT_EXIST):
        if values:
            errs.append(_field_invalid(values_path, values, "values set must be empty for exists and does not exist"))
    elif op in (GREATER_THAN, LESS_THAN):
        if len(values) != 1:
            errs.append(_field_invalid(values_path, values, "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, v in enumerate(values):
            if _parse_int64(v) is None:
                errs.append(_field_invalid(f"{values_path}[{i}]", v,
                                           "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        supported = ", ".join(_go_quote(o) for o in _BINARY_OPERATORS + (EXISTS, DOES_NOT_EXIST))
        errs.append(f"{child('operator')}: Unsupported value: {_go_quote(op)}: supported values: {supported}")
    for i, v in enumerate(values):
        value_errs = names.is_valid_label_value(v)
        if value_errs:
            errs.append(_field_invalid(f"{values_path}[{i}][{key}]", v, "; ".join(value_errs)))
    message = _aggregate(errs)
    if message is not None:
        raise SelectorError(message)
    return Requirement(key, op, tuple(values))


# --------------------------------------------------------------------------
# Compiled label selectors.

_NO_LABELS: Mapping[str, str] = {}


class LabelSelector:
    """An immutable, callable label selector: ``sel(labels) -> bool``.

    ``labels`` may be ``None`` (an object without labels). ``empty`` is True
    when the selector does not restrict anything, so callers can skip the
    filter altogether; ``requirements`` are sorted by key as upstream does.
    """

    __slots__ = ("requirements", "empty")

    requirements: tuple[Requirement, ...]
    empty: bool

    def __init__(self, requirements: tuple[Requirement, ...], empty: bool) -> None:
        object.__setattr__(self, "requirements", requirements)
        object.__setattr__(self, "empty", empty)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __call__(self, labels: Mapping[str, str] | None) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def exact(self, key: str) -> str | None:
        """The value ``key`` must have, as RequiresExactMatch; lets callers use an index."""
        for r in self.requirements:
            if r.key == key:
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {str(self)!r}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return (self.empty, self.requirements) == (other.empty, other.requirements)

    def __hash__(self) -> int:
        return hash((self.empty, self.requirements))


class _Everything(LabelSelector):
    __slots__ = ()

    def __call__(self, labels: Mapping[str, str] | None) -> bool:
        return True


class _Nothing(LabelSelector):
    # labels.Nothing(): matches no object and is not Empty().
    __slots__ = ()

    def __call__(self, labels: Mapping[str, str] | None) -> bool:
        return False

    def __str__(self) -> str:
        return ""


class _OneEquals(LabelSelector):
    """``k=v`` (or ``k in (v)``): one dict lookup and a compare."""

    __slots__ = ("_key", "_value")

    def __init__(self, requirements: tuple[Requirement, ...]) -> None:
        super().__init__(requirements, False)
        object.__setattr__(self, "_key", requirements[0].key)
        object.__setattr__(self, "_value", requirements[0].values[0])

    def __call__(self, labels: Mapping[str, str] | None) -> bool:
        # A missing key yields None, which never equals a str value.
        return labels is not None and labels.get(self._key) == self._value


class _AllEquals(LabelSelector):
    """Several ``k=v`` terms, the shape of a typical matchLabels."""

    __slots__ = ("_pairs",)

    def __init__(self, requirements: tuple[Requirement, ...]) -> None:
        super().__init__(requirements, False)
        object.__setattr__(self, "_pairs", tuple((r.key, r.values[0]) for r in requirements))

    def __call__(self, labels: Mapping[str, str] | None) -> bool:
        if labels is None:
            return False
        get = labels.get
        for k, v in self._pairs:
            if get(k) != v:
                return False
        return True


class _General(LabelSelector):
    __slots__ = ("_checks",)

    def __init__(self, requirements: tuple[Requirement, ...]) -> None:
        super().__init__(requirements, False)
        object.__setattr__(self, "_checks", tuple(_compile(r) for r in requirements))

    def __call__(self, labels: Mapping[str, str] | None) -> bool:
        if labels is None:
            labels = _NO_LABELS
        for check in self._checks:
            if not check(labels):
                return False
        return True


def _compile(r: Requirement) -> Callable[[Mapping[str, str]], bool]:
    """One requirement as a closure, with Requirement.Matches semantics."""
    k, op = r.key, r.operator
    if op in (EQUALS, DOUBLE_EQUALS) or (op == IN and len(r.values) == 1):
        v = r.values[0]
        return lambda labels: labels.get(k) == v
    if op == IN:
        vs = frozenset(r.values)
        return lambda labels: labels.get(k) in vs
    if op == NOT_EQUALS or (op == NOT_IN and len(r.values) == 1):
        v = r.values[0]
        # Upstream: a missing key satisfies != and notin.
        return lambda labels: labels.get(k) != v
    if op == NOT_IN:
        vs = frozenset(r.values)
        return lambda labels: labels.get(k) not in vs
    if op == EXISTS:
        return lambda labels: k in labels
    if op == DOES_NOT_EXIST:
        return lambda labels: k not in labels
    bound = _parse_int64(r.values[0]) if len(r.values) == 1 else None
    if bound is None:
        return lambda labels: False
    if op == GREATER_THAN:
        def gt(labels: Mapping[str, str]) -> bool:
            n = _parse_int64(labels.get(k))
            return n is not None and n > bound
        return gt

    def lt(labels: Mapping[str, str]) -> bool:
        n = _parse_int64(labels.get(k))
        return n is not None and n < bound
    return lt


EVERYTHING: LabelSelector = _Everything((), True)
NOTHING: LabelSelector = _Nothing((), False)


def _build(requirements: Iterable[Requirement]) -> LabelSelector:
    reqs = tuple(sorted(requirements, key=lambda r: r.key))  # sort.Sort(ByKey(...))
    if not reqs:
        return EVERYTHING
    exact = [r.operator in (EQUALS, DOUBLE_EQUALS) or (r.operator == IN and len(r.values) == 1)
             for r in reqs]
    if all(exact):
        return _OneEquals(reqs) if len(reqs) == 1 else _AllEquals(reqs)
    return _General(reqs)


# --------------------------------------------------------------------------
# The label selector string syntax: lexer and parser of pkg/labels.

_EOS, _CLOSE, _COMMA, _NOT, _DEQ, _EQ, _GT, _IDENT, _IN, _LT, _NEQ, _NOTIN, _OPEN = range(13)
_KEYWORDS = {"in": _IN, "notin": _NOTIN}
_SYMBOLS = {")": _CLOSE, ",": _COMMA, "!": _NOT, "==": _DEQ, "=": _EQ, ">": _GT, "<": _LT,
            "!=": _NEQ, "(": _OPEN}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_OPERATOR_OF = {_IN: IN, _EQ: EQUALS, _DEQ: DOUBLE_EQUALS, _GT: GREATER_THAN, _LT: LESS_THAN,
                _NOTIN: NOT_IN, _NEQ: NOT_EQUALS}


def _lex(text: str) -> list[tuple[int, str]]:
    """Tokens up to and including the end-of-string token.

    A NUL byte reads as end of input where a token would start, and is
    swallowed where it ends one, exactly as upstream's byte reader does.
    """
    items: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n or text[i] == "\0":
            items.append((_EOS, ""))
            return items
        ch = text[i]
        if ch in _SPECIAL:
            # Greedy: "==" and "!=" are the only two-symbol tokens.
            two = text[i:i + 2]
            sym = two if two in ("==", "!=") else ch
            items.append((_SYMBOLS[sym], sym))
            i += len(sym)
            if i < n and text[i] == "\0":
                i += 1
            continue
        j = i
        while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE and text[j] != "\0":
            j += 1
        word = text[i:j]
        items.append((_KEYWORDS.get(word, _IDENT), word))
        i = j + 1 if j < n and text[j] == "\0" else j


class _RequirementError(Exception):
    """An error inside one requirement; parse() prefixes it as upstream does."""


class _Parser:
    __slots__ = ("items", "pos")

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def _at(self, i: int, values: bool) -> tuple[int, str]:
        tok, lit = self.items[min(i, len(self.items) - 1)]
        if values and tok in (_IN, _NOTIN):
            # In value position "in" and "notin" are plain identifiers.
            tok = _IDENT
        return tok, lit

    def peek(self, values: bool = True) -> tuple[int, str]:
        return self._at(self.pos, values)

    def next(self, values: bool = True) -> tuple[int, str]:
        item = self._at(self.pos, values)
        self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.peek()
            if tok in (_IDENT, _NOT):
                try:
                    reqs.append(self.requirement())
                except _RequirementError as err:
                    raise SelectorError(f"unable to parse requirement: {err}") from None
                except SelectorError as err:
                    raise SelectorError(f"unable to parse requirement: {err.message}") from None
                tok, lit = self.next()
                if tok == _EOS:
                    return reqs
                if tok == _COMMA:
                    tok2, lit2 = self.peek()
                    if tok2 not in (_IDENT, _NOT):
                        raise SelectorError(f"found '{lit2}', expected: identifier after ','")
                    continue
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            if tok == _EOS:
                return reqs
            raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        key, op = self.key_and_inferred_operator()
        if op in (EXISTS, DOES_NOT_EXIST):
            return _new_requirement(key, op, [], None)
        op = self.operator()
        values = self.value_set() if op in (IN, NOT_IN) else self.exact_value()
        return _new_requirement(key, op, sorted(values), None)

    def key_and_inferred_operator(self) -> tuple[str, str]:
        op = ""
        tok, lit = self.next()
        if tok == _NOT:
            op = DOES_NOT_EXIST
            tok, lit = self.next()
        if tok != _IDENT:
            raise _RequirementError(f"found '{lit}', expected: identifier")
        errs = names.is_qualified_name(lit)
        if errs:
            # validateLabelKey with a nil *field.Path prints "<nil>".
            raise _RequirementError(_field_invalid("<nil>", lit, "; ".join(errs)))
        if self.peek()[0] in (_EOS, _COMMA) and op != DOES_NOT_EXIST:
            op = EXISTS
        return lit, op

    def operator(self) -> str:
        tok, lit = self.next(values=False)
        if tok not in _OPERATOR_OF:
            raise _RequirementError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        return _OPERATOR_OF[tok]

    def value_set(self) -> set[str]:
        tok, lit = self.next()
        if tok != _OPEN:
            raise _RequirementError(f"found '{lit}' expected: '('")
        tok, lit = self.peek()
        if tok in (_IDENT, _COMMA):
            values = self.identifiers()
            if self.next()[0] != _CLOSE:
                raise _RequirementError(f"found '{lit}', expected: ')'")
            return values
        if tok == _CLOSE:
            self.next()
            return {""}
        raise _RequirementError(f"found '{lit}', expected: ',', ')' or identifier")

    def identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.next()
            if tok == _IDENT:
                values.add(lit)
                tok2, lit2 = self.peek()
                if tok2 == _COMMA:
                    continue
                if tok2 == _CLOSE:
                    return values
                raise _RequirementError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _COMMA:
                # "(," / ",," / ",)" each stand for an empty value.
                if not values:
                    values.add("")
                tok2 = self.peek()[0]
                if tok2 == _CLOSE:
                    values.add("")
                    return values
                if tok2 == _COMMA:
                    self.next()
                    values.add("")
                continue
            raise _RequirementError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        if self.peek()[0] in (_EOS, _COMMA):
            return {""}
        tok, lit = self.next()
        if tok == _IDENT:
            return {lit}
        raise _RequirementError(f"found '{lit}', expected: identifier")


@lru_cache(maxsize=1024)
def parse_label_selector(text: str) -> LabelSelector:
    """``?labelSelector=`` to a selector, or :class:`SelectorError` with upstream's message.

    Results are cached: informers ask with the same selector over and over.
    """
    if not text:
        return EVERYTHING
    return _build(_Parser(text).parse())


_LABEL_SELECTOR_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def label_selector_from_object(sel: Mapping | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` as a selector, as LabelSelectorAsSelector.

    ``None`` selects nothing; ``{}`` (no matchLabels, no matchExpressions)
    selects everything.
    """
    if sel is None:
        return NOTHING
    match_labels = sel.get("matchLabels") or {}
    match_expressions = sel.get("matchExpressions") or []
    if len(match_labels) + len(match_expressions) == 0:
        return EVERYTHING
    reqs: list[Requirement] = []
    for key in sorted(match_labels):  # Go iterates a map; sorting makes the first error stable
        reqs.append(_new_requirement(key, EQUALS, [match_labels[key]], None))
    for expr in match_expressions:
        operator = expr.get("operator", "")
        op = _LABEL_SELECTOR_OPERATORS.get(operator) if isinstance(operator, str) else None
        if op is None:
            raise SelectorError(f"{_go_quote(str(operator))} is not a valid label selector operator")
        reqs.append(_new_requirement(expr.get("key", ""), op, list(expr.get("values") or []), None))
    return _build(reqs)


# --------------------------------------------------------------------------
# Field selectors (pkg/fields).


class FieldSelector:
    """An immutable, callable field selector: ``sel(fields) -> bool``.

    ``fields`` maps a field path (``metadata.name``, ``spec.nodeName``) to its
    string value; a missing field reads as ``""``, as ``fields.Set.Get`` does.
    ``terms`` are ``(field, operator, value)`` with operator ``"="`` or
    ``"!="``, in upstream's (sorted) order.
    """

    __slots__ = ("terms", "empty")

    terms: tuple[tuple[str, str, str], ...]
    empty: bool

    def __init__(self, terms: tuple[tuple[str, str, str], ...]) -> None:
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "empty", not terms)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __call__(self, fields: Mapping[str, str]) -> bool:
        for field, op, value in self.terms:
            if (fields.get(field, "") == value) != (op == "="):
                return False
        return True

    def exact(self, field: str) -> str | None:
        """The value ``field`` must equal, as RequiresExactMatch; lets callers use an index."""
        for f, op, value in self.terms:
            if f == field and op == "=":
                return value
        return None

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{_escape_field_value(v)}" for f, op, v in self.terms)

    def __repr__(self) -> str:
        return f"<FieldSelector {str(self)!r}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self.terms == other.terms

    def __hash__(self) -> int:
        return hash(self.terms)


class _EverythingFields(FieldSelector):
    __slots__ = ()

    def __call__(self, fields: Mapping[str, str]) -> bool:
        return True


class _OneFieldEquals(FieldSelector):
    """``f=v``, the shape of ``spec.nodeName=x`` and ``metadata.name=y``."""

    __slots__ = ("_field", "_value")

    def __init__(self, terms: tuple[tuple[str, str, str], ...]) -> None:
        super().__init__(terms)
        object.__setattr__(self, "_field", terms[0][0])
        object.__setattr__(self, "_value", terms[0][2])

    def __call__(self, fields: Mapping[str, str]) -> bool:
        return fields.get(self._field, "") == self._value


EVERYTHING_FIELDS: FieldSelector = _EverythingFields(())

_TERM_OPERATORS = ("!=", "==", "=")  # "==" before "=" so no "=" is left on the value


def _split_terms(text: str) -> list[str]:
    # Commas escaped with a backslash are data, not separators.
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    # The left-hand side has no escaping: the first operator found splits.
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape_field_value(s: str) -> str:
    if "\\" not in s and "," not in s and "=" not in s:
        return s
    out: list[str] = []
    in_slash = False
    for c in s:
        if in_slash:
            if c not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # UnescapedRune formats the rune with %v, i.e. as its code point.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _escape_field_value(s: str) -> str:
    return s.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def parse_field_selector(text: str, allowed: frozenset[str]) -> FieldSelector:
    """``?fieldSelector=`` to a selector over the fields in ``allowed``.

    Syntax errors are reported before unsupported fields, and both for the
    first offending term in sorted order, which is the order upstream parses
    and then transforms them in.
    """
    if not text:
        return EVERYTHING_FIELDS
    return _parse_field_selector(text, allowed)


@lru_cache(maxsize=1024)
def _parse_field_selector(text: str, allowed: frozenset[str]) -> FieldSelector:
    parts = sorted(_split_terms(text))
    terms: list[tuple[str, str, str]] = []
    for part in parts:
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        lhs, op, rhs = split
        terms.append((lhs, "!=" if op == "!=" else "=", _unescape_field_value(rhs)))
    for field, _, _ in terms:
        if field not in allowed:
            raise SelectorError(f"field label not supported: {field}")
    if not terms:
        return EVERYTHING_FIELDS
    if len(terms) == 1 and terms[0][1] == "=":
        return _OneFieldEquals(tuple(terms))
    return FieldSelector(tuple(terms))
