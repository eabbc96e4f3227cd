"""Upstream's empty map for an unknown domain, as a rewrite of the selector's text.

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
here can answer for a key it lacks. Instead the selector's text is
rewritten before its final compile: each lookup of a domain becomes an
optional lookup with ``{}`` as its default::

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

The rewrite works on tokens, not on an AST: it only ever runs on text that
has compiled, it keeps everything else byte for byte, and the result is
compiled again (and checked) like any selector.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


def rewrite(source: str) -> str:
    """``source`` with every domain lookup defaulting to ``{}``; the text unchanged where there is none."""
    tokens = tokenize(source)
    if not any(t.text == DEVICE for t in tokens):
        return source
    body = _Renderer(source, tokens, _matching(tokens)).render(0, len(tokens), frozenset())
    return source[:tokens[0].start] + body + source[tokens[-1].end:]     # leading blanks, a trailing comment


class _Renderer:
    def __init__(self, source: str, tokens: list[Token], matching: dict[int, int]) -> None:
        self.src = source
        self.toks = tokens
        self.match = matching

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
        if self._member(i) or not self._is(i, "cel", ".", "bind", "(") or self.toks[i + 4].kind != "ident":
            return None
        if not (self._is(i + 5, ",") and self._base(i + 6, frozenset()) == 3 and self._is(i + 9, ",")):
            return None
        return self.toks[i + 4].text, i + 10, self.match.get(i + 3, len(self.toks))

    def render(self, lo: int, hi: int, aliases: frozenset[str]) -> str:
        """Tokens ``lo``..``hi`` (exclusive) as text, blanks between them kept, lookups rewritten."""
        toks, src = self.toks, self.src
        out: list[str] = []
        i = lo
        pos = toks[lo].start if lo < hi else 0
        while i < hi:
            t = toks[i]
            out.append(src[pos:t.start])
            close = self._has_of_field(i, aliases)
            if close != -1:
                out.append("true")
                pos, i = toks[close].end, close + 1
                continue
            bind = self._bind(i)
            if bind is not None:
                name, body, close = bind
                out.append(src[t.start:toks[body].start])
                out.append(self.render(body, min(close, hi), aliases | {name}))
                pos, i = toks[min(close, hi) - 1].end, min(close, hi)
                continue
            n = self._base(i, aliases)
            lookup = self._lookup(i, n, hi, aliases) if n else None
            if lookup is not None:
                text, last = lookup
                out.append(text)
                pos, i = toks[last].end, last + 1
                continue
            out.append(t.text)
            pos, i = t.end, i + 1
        return "".join(out)

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
