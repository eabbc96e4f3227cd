"""Selector text rewritten so that cel-expr-python answers as upstream's cel-go does, and cheaply.

Two rewrites, both on tokens (not an AST): they only ever run on text that
has compiled, keep everything else byte for byte, and their result is
compiled again (and checked) like any selector. :func:`rewrite` applies both.

**Unknown domains look up as empty maps** (:func:`default_domains`).
Upstream (k8s.io/dynamic-resource-allocation/cel, ``mapper.Find``) hands a
selector ``device.attributes`` and ``device.capacity`` as maps whose lookup
of an unknown domain finds an empty map, while ``"d" in device.attributes``,
``size()`` and iteration see only the domains the device has. So

* ``device.attributes["other.example.com"]`` is ``{}``: ``has(...x.model)``,
  ``"model" in ...``, ``.?model`` work on a device without that domain, and
  ``.model`` fails with ``no such key: model``, not ``no such key:
  other.example.com``;
* ``device.attributes[?"d"]`` is always a present optional, and
  ``has(device.attributes.d)`` always true (both go through that lookup).

cel-expr-python converts a Python dict into a CEL map eagerly, so no map
here can answer for a key it lacks. Instead each lookup of a domain becomes
an optional lookup with ``{}`` as its default::

    device.attributes["d"]     ->  device.attributes[?"d"].orValue({})
    device.capacity.d          ->  device.capacity[?"d"].orValue({})
    device.attributes[?"d"]    ->  optional.of(device.attributes[?"d"].orValue({}))
    device.attributes.?d       ->  optional.of(device.attributes[?"d"].orValue({}))
    has(device.attributes.d)   ->  true
    has(device.driver)         ->  true    (a field every device has)

The same holds for a name ``cel.bind`` binds to ``device.attributes`` or
``device.capacity``, within the bind. Not covered, and then a missing domain
fails with ``no such key: <domain>``: the maps reached any other way (through
a comprehension variable, a list, a ternary, or a ``device`` shadowed by a
comprehension variable of that name).

**Quantity and Semver comparisons run in CEL** (:func:`native_calls`).
cel-expr-python 0.1.3 never releases the arguments of a call into a Python
function (``PyCelFunctionAdapter::Invoke`` lacks the ``Py_DECREF`` of the
argument tuple and of the result): about 0.6 KB per Quantity or Semver
argument, 50 to 100 bytes per int or string, for as long as the process
lives. So the calls a device selector makes most never reach Python:

* ``quantity("40Gi")`` and ``semver("1.2.0")`` (``semver("v1.2", true)``)
  of a literal that parses become message literals
  (``kubernetes.Quantity{_v: ..., _k: ...}``); one that does not parse stays a
  call, which fails at run time with upstream's message;
* ``R.compareTo(A)``, ``R.isGreaterThan(A)``, ``R.isLessThan(A)`` (only
  Quantity and Semver have them) compare the values' order keys ``_k`` with
  CEL's string comparison, after a type check that fails, as upstream does,
  ``no such overload`` when ``R`` and ``A`` are not both Quantities or both
  Semvers (through a Python function without arguments, which leaks nothing)::

    cel.bind(__tandem_l, R, cel.bind(__tandem_r, A,
        <both Quantity or both Semver> ? __tandem_l._k > __tandem_r._k : tandem.noSuchOverloadBool()))

Every other library function (``sign``, ``asInteger``, ``major``, ``add``,
``isSorted``, ``sum``, ...) still calls Python, and leaks so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scheduler.dra.celvalues import (
    QUANTITY_TYPE, SEMVER_TYPE, ParseError, canonical_semver, parse_nanos, parse_semver, quantity_key, semver_key,
)

DEVICE = "device"
DOMAIN_MAPS = frozenset({"attributes", "capacity"})
DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<raw>(?:[rR][bB]?|[bB][rR])(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n]*"|'[^'\n]*'))
  | (?P<string>[bB]?(?:\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''(?:\\[\s\S]|[^\\])*?'''
                    |"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<number>(?:0[xX][0-9a-fA-F]+|(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[uU]?)
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*|`[^`]*`)
  | (?P<punct>==|!=|<=|>=|&&|\|\||[^\s])
""", re.VERBOSE)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    start: int
    end: int


def tokenize(source: str) -> list[Token]:
    """CEL's tokens, comments and blanks left out (a raw string's backslashes escape nothing)."""
    out: list[Token] = []
    pos = 0
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None:                     # cannot happen for text that compiled; keep the rest whole
            out.append(Token("punct", source[pos:], pos, len(source)))
            break
        kind = "string" if m.lastgroup == "raw" else m.lastgroup or "punct"
        if kind != "space":
            out.append(Token(kind, m.group(), pos, m.end()))
        pos = m.end()
    return out


def _matching(tokens: list[Token]) -> dict[int, int]:
    """Index of each opening bracket -> index of the bracket that closes it."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack: list[int] = []
    out: dict[int, int] = {}
    for i, t in enumerate(tokens):
        if t.kind != "punct":
            continue
        if t.text in pairs:
            stack.append(i)
        elif t.text in (")", "]", "}") and stack:
            out[stack.pop()] = i
    return out


class _Rewriter:
    """Tokens back to text, the blanks between them kept, with what :meth:`_replacement` says at each token."""

    def __init__(self, source: str, tokens: list[Token], matching: dict[int, int]) -> None:
        self.src = source
        self.toks = tokens
        self.match = matching

    def _replacement(self, i: int, hi: int, scope: frozenset[str]) -> tuple[str, int] | None:
        """Text standing for tokens ``i``..``last`` (with ``last`` < ``hi``), or None to keep token ``i``."""
        raise NotImplementedError

    def rewrite(self) -> str:
        toks = self.toks
        return self.src[:toks[0].start] + self.render(0, len(toks), frozenset()) + self.src[toks[-1].end:]

    def render(self, lo: int, hi: int, scope: frozenset[str]) -> str:
        toks, src = self.toks, self.src
        out: list[str] = []
        i = lo
        pos = toks[lo].start if lo < hi else 0
        while i < hi:
            out.append(src[pos:toks[i].start])
            text, last = self._replacement(i, hi, scope) or (toks[i].text, i)
            out.append(text)
            pos, i = toks[last].end, last + 1
        return "".join(out)


def rewrite(source: str) -> str:
    """Both rewrites: comparisons and literal constructors in CEL, then unknown domains as empty maps."""
    return default_domains(native_calls(source))


# ---------------------------------------------------------------------------------------------- domains

def default_domains(source: str) -> str:
    """``source`` with every domain lookup defaulting to ``{}``; the text unchanged where there is none."""
    tokens = tokenize(source)
    if not any(t.text == DEVICE for t in tokens):
        return source
    return _Domains(source, tokens, _matching(tokens)).rewrite()


class _Domains(_Rewriter):
    def _is(self, i: int, *texts: str) -> bool:
        return all(i + k < len(self.toks) and self.toks[i + k].text == t for k, t in enumerate(texts))

    def _member(self, i: int) -> bool:
        """Whether token ``i`` follows a ``.`` (then it names a field or method, not a variable)."""
        return i > 0 and self.toks[i - 1].text == "."

    def _base(self, i: int, aliases: frozenset[str]) -> int:
        """How many tokens from ``i`` spell ``device.attributes``, ``device.capacity`` or a bound alias; 0 if none."""
        if self._member(i):
            return 0
        if self._is(i, DEVICE, ".") and i + 2 < len(self.toks) and self.toks[i + 2].text in DOMAIN_MAPS:
            return 3
        return 1 if self.toks[i].kind == "ident" and self.toks[i].text in aliases else 0

    def _has_of_field(self, i: int, aliases: frozenset[str]) -> int:
        """If ``has(`` at ``i`` tests a device field or a domain (always present upstream): its ``)``, else -1."""
        if self._member(i) or not self._is(i, "has", "("):
            return -1
        close = self.match.get(i + 1, -1)
        if close == -1:
            return -1
        inner = self.toks[i + 2:close]
        if len(inner) == 3 and inner[0].text == DEVICE and inner[1].text == "." and inner[2].text in DEVICE_FIELDS:
            return close
        n = self._base(i + 2, aliases)
        if n and close == i + 2 + n + 2 and self.toks[i + 2 + n].text == "." and \
                self.toks[i + 3 + n].kind == "ident":
            return close
        return -1

    def _bind(self, i: int) -> tuple[str, int, int] | None:
        """``cel.bind(name, device.attributes, body)`` at ``i``: (name, first body token, closing paren)."""
        if self._member(i) or not self._is(i, "cel", ".", "bind", "(") or i + 4 >= len(self.toks) or \
                self.toks[i + 4].kind != "ident":
            return None
        if not (self._is(i + 5, ",") and self._base(i + 6, frozenset()) == 3 and self._is(i + 9, ",")):
            return None
        return self.toks[i + 4].text, i + 10, self.match.get(i + 3, len(self.toks))

    def _replacement(self, i: int, hi: int, aliases: frozenset[str]) -> tuple[str, int] | None:
        close = self._has_of_field(i, aliases)
        if close != -1:
            return "true", close
        bind = self._bind(i)
        if bind is not None:
            name, body, close = bind
            end = min(close, hi)
            head = self.src[self.toks[i].start:self.toks[body].start]      # cel.bind(name, device.attributes,
            return head + self.render(body, end, aliases | {name}), end - 1
        n = self._base(i, aliases)
        return self._lookup(i, n, hi, aliases) if n else None

    def _lookup(self, i: int, n: int, hi: int, aliases: frozenset[str]) -> tuple[str, int] | None:
        """The rewritten lookup right after the base at ``i`` (``n`` tokens), and its last token; None if none."""
        toks = self.toks
        base = self.src[toks[i].start:toks[i + n - 1].end]
        k = i + n
        if k < hi and toks[k].text == "[":
            close = self.match.get(k, -1)
            if close == -1 or close >= hi:
                return None
            optional = toks[k + 1].text == "?"
            key = self.render(k + 2 if optional else k + 1, close, aliases)
            text = f"{base}[?{key}].orValue({{}})"
            return (f"optional.of({text})" if optional else text), close
        if k + 1 < hi and toks[k].text == ".":
            optional = toks[k + 1].text == "?"
            f = k + 2 if optional else k + 1
            if f < hi and toks[f].kind == "ident" and not toks[f].text.startswith("`") and \
                    not (f + 1 < hi and toks[f + 1].text == "("):
                text = f'{base}[?"{toks[f].text}"].orValue({{}})'
                return (f"optional.of({text})" if optional else text), f
        return None


# ---------------------------------------------------------------------------------------------- native calls

COMPARISONS = frozenset({"compareTo", "isGreaterThan", "isLessThan"})
NO_SUCH_OVERLOAD_INT = "tandem.noSuchOverloadInt"     # declared in cellib: fail "no such overload", no arguments
NO_SUCH_OVERLOAD_BOOL = "tandem.noSuchOverloadBool"
_KEYWORDS = frozenset({"in", "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
                       "loop", "package", "namespace", "return", "var", "void", "while"})
_L, _R = "__tandem_l", "__tandem_r"


def native_calls(source: str) -> str:
    """``source`` with literal quantity()/semver() as message literals and comparisons as CEL's own."""
    tokens = tokenize(source)
    if not any(t.text in COMPARISONS or t.text in ("quantity", "semver") for t in tokens):
        return source
    return _Calls(source, tokens, _matching(tokens)).rewrite()


def _comparison(method: str, receiver: str, arg: str) -> str:
    both = (f"(type({_L}) == {QUANTITY_TYPE} || type({_L}) == {SEMVER_TYPE}) && type({_L}) == type({_R})")
    if method == "compareTo":
        answer = f"({_L}._k < {_R}._k ? -1 : ({_L}._k > {_R}._k ? 1 : 0))"
        fail = f"{NO_SUCH_OVERLOAD_INT}()"
    else:
        answer = f"{_L}._k {'>' if method == 'isGreaterThan' else '<'} {_R}._k"
        fail = f"{NO_SUCH_OVERLOAD_BOOL}()"
    return f"cel.bind({_L}, {receiver}, cel.bind({_R}, {arg}, {both} ? {answer} : {fail}))"


def _string_literal(token: Token) -> str | None:
    """The value of a plain string literal, or None for one this rewrite leaves alone (escapes, bytes, triple)."""
    text = token.text
    raw = text[:1] in "rR"
    body = text[1:] if raw else text
    if token.kind != "string" or len(body) < 2 or body[0] not in "'\"" or body[0] != body[-1] or \
            body.startswith(body[0] * 3) or (not raw and "\\" in body):
        return None
    return body[1:-1]


def _message(type_name: str, value: str, key: str) -> str:
    return f'{type_name}{{_v: "{value}", _k: "{key}"}}'


class _Calls(_Rewriter):
    def __init__(self, source: str, tokens: list[Token], matching: dict[int, int]) -> None:
        super().__init__(source, tokens, matching)
        self.opening = {close: open_ for open_, close in matching.items()}
        # comparison calls by the first token of their receiver: (the dot before the method, closing paren)
        self.calls: dict[int, tuple[int, int]] = {}
        for i, t in enumerate(tokens):
            if t.text == "." and i + 2 < len(tokens) and tokens[i + 1].text in COMPARISONS and \
                    tokens[i + 2].text == "(":
                close = matching.get(i + 2, -1)
                start = self._receiver_start(i)
                if close > i + 3 and start is not None and not self._has_top_level_comma(i + 3, close):
                    if close > self.calls.get(start, (0, -1))[1]:
                        self.calls[start] = (i, close)

    def _has_top_level_comma(self, lo: int, hi: int) -> bool:
        i = lo
        while i < hi:
            if self.toks[i].text == ",":
                return True
            i = self.match.get(i, i) + 1
        return False

    def _ends_operand(self, i: int) -> bool:
        t = self.toks[i]
        return (t.kind in ("string", "number") or t.text in (")", "]", "}") or
                (t.kind == "ident" and t.text not in _KEYWORDS))

    def _receiver_start(self, dot: int) -> int | None:
        """The first token of the postfix expression that ends right before ``dot``; None if unsure."""
        j = dot - 1
        while j >= 0:
            t = self.toks[j]
            if t.text == ")":
                o = self.opening.get(j, -1)
                if o > 0 and self.toks[o - 1].kind == "ident" and self.toks[o - 1].text not in _KEYWORDS:
                    j = o - 1                  # a call: its name, then whatever it is a member of
                else:
                    return o if o >= 0 else None   # a parenthesized expression begins the chain
            elif t.text == "]":
                o = self.opening.get(j, -1)
                if o > 0 and self._ends_operand(o - 1):
                    j = o - 1                  # an index: the operand before it
                    continue
                return o if o >= 0 else None   # a list literal begins the chain
            elif t.text == "}":
                o = self.opening.get(j, -1)
                if o > 0 and self.toks[o - 1].kind == "ident":
                    j = o - 1                  # a message literal: its (maybe qualified) name
                else:
                    return o if o >= 0 else None   # a map literal begins the chain
            if self.toks[j].kind in ("string", "number"):
                return j
            if self.toks[j].kind != "ident" or self.toks[j].text in _KEYWORDS:
                return None
            if j >= 2 and self.toks[j - 1].text == "?" and self.toks[j - 2].text == ".":
                j -= 3                         # x.?f: go on to x
            elif j >= 1 and self.toks[j - 1].text == ".":
                if j == 1:
                    return 0                   # .name: a name from the root
                j -= 2                         # x.f: go on to x
            else:
                return j
        return None

    def _replacement(self, i: int, hi: int, scope: frozenset[str]) -> tuple[str, int] | None:
        call = self.calls.get(i)
        if call is not None and call[1] < hi:
            dot, close = call
            method = self.toks[dot + 1].text
            return _comparison(method, self.render(i, dot, scope), self.render(dot + 3, close, scope)), close
        return self._folded(i)

    def _folded(self, i: int) -> tuple[str, int] | None:
        """``quantity("40Gi")`` or ``semver("1.2.0"[, true|false])`` at ``i`` as a message literal, if it parses."""
        toks = self.toks
        name = toks[i].text
        if name not in ("quantity", "semver") or (i > 0 and toks[i - 1].text == ".") or \
                i + 3 >= len(toks) or toks[i + 1].text != "(":
            return None
        close = self.match.get(i + 1, -1)
        value = _string_literal(toks[i + 2])
        if value is None:
            return None
        try:
            if name == "quantity" and close == i + 3:
                nanos = parse_nanos(value)
                return _message(QUANTITY_TYPE, str(nanos), quantity_key(nanos)), close
            if name == "semver" and close == i + 3:
                version = parse_semver(value)
            elif name == "semver" and close == i + 5 and toks[i + 3].text == "," and \
                    toks[i + 4].text in ("true", "false"):
                version = parse_semver(value, toks[i + 4].text == "true")
            else:
                return None
        except ParseError:
            return None                        # left a call: it fails at run time with upstream's message
        return _message(SEMVER_TYPE, canonical_semver(version), semver_key(version)), close
