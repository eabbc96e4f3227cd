"""The CEL environment of DRA device selectors: compile once, evaluate against many devices.

A DeviceClass's ``spec.selectors[].cel.expression`` and a ResourceClaim
request's (``exactly.selectors``, ``firstAvailable[].selectors``) select
devices of ResourceSlices, as k8s.io/dynamic-resource-allocation/cel does for
kube-scheduler. The library is cel-expr-python (Google's cel-cpp); why, and
how it compares with the other two on PyPI, is in docs/dra-cel.md.

What a selector sees, as upstream:

* ``device.driver`` (string), ``device.allowMultipleAllocations`` (bool,
  false when the device does not say; DRAConsumableCapacity is beta and on in
  1.36);
* ``device.attributes[domain][id]`` and ``device.capacity[domain][id]``: a
  qualified name ``dra.example.com/model`` is id ``model`` of domain
  ``dra.example.com``, an unqualified one belongs to the driver's domain.
  Attribute values are int, bool, string, or a ``semver`` for ``version``
  (the lists of the alpha list-type attributes become lists); capacities are
  ``quantity`` values;
* a domain the device lacks looks up as an empty map, so
  ``"model" in device.attributes["x.example.com"]`` is false and
  ``device.attributes["x.example.com"].model`` fails ``no such key: model``;
  ``"x.example.com" in device.attributes`` is false (see celrewrite.py);
* the Kubernetes libraries of cellib.py, CEL's standard library, the strings
  extension, ``cel.bind`` and optional types.

The result must be a bool: an expression whose type is known not to be bool
fails to compile (``must evaluate to bool or the unknown type, not int``), one
of dynamic type fails at evaluation (``CEL result of type string could not be
converted to bool``).

Cost. Upstream stops an evaluation past 1,000,000 cost units
(``CELSelectorExpressionMaxCost``, "roughly 0.1 second"). cel-expr-python
has no cost tracking, so three guards stand in for it:

1. an expression longer than 10 KiB (``CELSelectorExpressionMaxLength``, which
   the apiserver enforces when one is written) does not compile;
2. cel-cpp stops an evaluation after 10,000 comprehension iterations
   (``comprehension_max_iterations``, cel-cpp's default, which the wrapper does
   not let us change): nested ``all``/``exists``/``map`` over big lists end
   there, as upstream's cost limit ends them;
3. an evaluation that takes more than 0.1 s of this thread's CPU time fails,
   and so does every later evaluation of that selector, without running. CPU
   time, with the garbage collector held off for the evaluation, so neither a
   loaded machine nor a collection's pause counts against a selector. cel-cpp
   holds the GIL while it evaluates and cannot be interrupted, so this cannot
   stop the slow run itself (the worst found, a 10 KiB selector that maps over
   the characters of a long string literal, runs 6 to 11 s within the
   iteration budget, because cel-cpp copies the list it builds at every step);
   it bounds the damage to one such run per selector text, not one per device.

The second and third report ``operation cancelled: actual cost limit
exceeded`` and what tripped, as upstream says it. Not covered: the cost of a
single call to a library function on a big value (each is linear in its input,
and inputs are bounded by the expression's length and the API's limits).

Memory. cel-expr-python 0.1.3 never releases the arguments of a call into a
Python function (0.6 KB a Quantity or Semver, 50 to 100 bytes an int or a
string, per call, for good). celrewrite.py therefore turns literal
``quantity()``/``semver()`` into message literals and ``compareTo``,
``isGreaterThan`` and ``isLessThan`` into CEL's own string comparisons of the
values' order keys: the selectors DRA drivers document make no Python call.
The rarer library functions (``sign``, ``asInteger``, ``major``, ``add``,
``isSorted``, ``sum``, ...) still leak when called; a DeviceView itself holds
no C++ memory (each evaluation converts it afresh, in an arena freed after).

Errors. ``CELError`` carries upstream's inner text: ``compilation failed:
ERROR: <input>:1:4: Syntax error: ...``, ``no such key: model``. The allocator
adds who owns the selector; :func:`format_selector_error` writes upstream's
whole message. Compile errors are not cached (upstream's cache keeps only
successes); each compile fails again.

Threads: cel-expr-python runs with the GIL held, so a Selector and the cache
may be shared by threads; the cache has its own lock.

This module must never import ``bench`` or ``plugins``; the allocator and the
device index call it, not the other way round.
"""

from __future__ import annotations

import functools
import gc
import logging
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from scheduler.dra import cellib, celrewrite
from scheduler.dra.celvalues import POOL, ParseError, quantity_of, semver_of

log = logging.getLogger("tandem.dra")

# k8s.io/api/resource/v1
CEL_SELECTOR_EXPRESSION_MAX_COST = 1_000_000      # what upstream's runtime limit is; see "Cost" above
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
# cel-cpp's RuntimeOptions.comprehension_max_iterations default, fixed in cel-expr-python 0.1.3
COMPREHENSION_ITERATION_BUDGET = 10_000
EVALUATION_TIME_LIMIT = 0.1                       # seconds: upstream's "roughly 0.1 second for each expression"
CACHE_SIZE = 256                                  # compiled selectors kept (kube-scheduler keeps 10; ours are cheap)

COST_LIMIT_EXCEEDED = "operation cancelled: actual cost limit exceeded"
# upstream's EnhanceRuntimeError hint (dynamic-resource-allocation/cel/errors.go)
NO_SUCH_KEY_HINT = (". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with "
                    "has() for optional fields")

T = cel.Type
VARIABLES = {
    "device.driver": T.STRING,
    "device.allowMultipleAllocations": T.BOOL,
    "device.attributes": T.Map(T.STRING, T.Map(T.STRING, T.DYN)),
    "device.capacity": T.Map(T.STRING, T.Map(T.STRING, cellib.QUANTITY)),
}


class CELError(Exception):
    """A selector that does not compile, or fails on a device. ``str()`` is upstream's inner message."""

    def __init__(self, message: str, expression: str, *, compile_error: bool) -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression
        self.compile_error = compile_error

    def __str__(self) -> str:
        return self.message


def format_selector_error(owner: str, index: int, err: CELError, device: str = "") -> str:
    """Upstream's allocator message; ``owner`` is ``class gpu`` or ``claim ns/name``, ``device`` driver/pool/name.

    ``class gpu: selector #0: CEL compile error: compilation failed: ...``
    ``claim ns/c: selector #1 on device gpu.example.com/pool/gpu-0: CEL runtime error: no such key: model. ...``
    """
    if err.compile_error:
        return f"{owner}: selector #{index}: CEL compile error: {err.message}"
    return f"{owner}: selector #{index} on device {device}: CEL runtime error: {enhance_runtime_error(err.message)}"


def enhance_runtime_error(message: str) -> str:
    """Upstream's EnhanceRuntimeError: a ``no such key`` error gets the hint about optional chaining and has()."""
    return message + NO_SUCH_KEY_HINT if "no such key:" in message else message


# ---------------------------------------------------------------------------------------------- devices

@dataclass(frozen=True, slots=True)
class DeviceView:
    """One device as selectors see it, built once (:func:`device_view`) and evaluated against many selectors."""

    driver: str
    name: str
    variables: Mapping[str, Any]     # cel-expr-python's activation: "device.driver" ... "device.capacity"
    problem: str = ""                # an attribute or capacity upstream could not convert: every match fails so


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """``dra.example.com/model`` -> (``dra.example.com``, ``model``); ``model`` -> (driver, ``model``)."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


# upstream's getAttributeValue order: the list kinds first, then the scalars
_ATTRIBUTE_KINDS = ("ints", "bools", "strings", "versions", "int", "bool", "string", "version")


def _attribute_value(attr: Mapping[str, Any]) -> Any:
    for kind in _ATTRIBUTE_KINDS:
        value = attr.get(kind)
        if value is None:
            continue
        if kind == "version":
            return _version(value)
        if kind == "versions":
            return [_version(v) for v in value]
        return list(value) if kind.endswith("s") else value
    raise ParseError("unsupported attribute value")


def _version(text: Any) -> Any:
    try:
        return semver_of(str(text))
    except ParseError as err:
        raise ParseError(f"parse semantic version: {err}") from None


def device_view(driver: str, device: Mapping[str, Any]) -> DeviceView:
    """``device``: one entry of ResourceSlice ``spec.devices[]`` as served (name, attributes, capacity, ...)."""
    attributes: dict[str, dict[str, Any]] = {}
    capacity: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for name, attr in (device.get("attributes") or {}).items():
        try:
            value = _attribute_value(attr or {})
        except ParseError as err:
            problems.append(f"attribute {name}: {err}")
            continue
        domain, ident = split_qualified_name(name, driver)
        attributes.setdefault(domain, {})[ident] = value
    for name, cap in (device.get("capacity") or {}).items():
        try:
            value = quantity_of(str((cap or {}).get("value", "")))
        except ParseError as err:
            problems.append(f"capacity {name}: {err}")
            continue
        domain, ident = split_qualified_name(name, driver)
        capacity.setdefault(domain, {})[ident] = value
    variables = {
        "device.driver": driver,
        "device.allowMultipleAllocations": bool(device.get("allowMultipleAllocations") or False),
        "device.attributes": attributes,
        "device.capacity": capacity,
    }
    return DeviceView(driver, str(device.get("name", "")), variables, problems[0] if problems else "")


# ---------------------------------------------------------------------------------------------- selectors

@functools.cache
def _env() -> Any:
    """The one environment, built on first use (~ms) so a scheduler without DRA never pays for it."""
    return cel.NewEnv(POOL, variables=VARIABLES, functions=cellib.declarations(),
                      extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings(), ext_optional.ExtOptional()])


class Selector:
    """One compiled selector expression. :meth:`matches` evaluates it against a device.

    Holds one piece of state, on purpose: once an evaluation has run over the
    time limit, the selector is over budget and fails at once from then on.
    """

    __slots__ = ("expression", "_program", "_time_limit", "_timer", "_over_budget")

    def __init__(self, expression: str, program: Any, time_limit: float, timer: Callable[[], float]) -> None:
        self.expression = expression
        self._program = program
        self._time_limit = time_limit
        self._timer = timer
        self._over_budget = ""

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"

    def matches(self, device: DeviceView) -> bool:
        """Whether ``device`` is selected. Raises CELError on a runtime error or past the cost limit."""
        if device.problem:
            raise self._error(device.problem)
        if self._over_budget:
            raise self._error(self._over_budget)
        collecting = gc.isenabled()
        gc.disable()                      # a collection's pause is not the selector's cost
        start = self._timer()
        try:
            result, failure = self._program.eval(data=device.variables), ""
        except RuntimeError as err:       # cel-cpp's own failures (the iteration budget) are raised, not returned
            result, failure = None, runtime_message(str(err))
        finally:
            elapsed = self._timer() - start
            if collecting:
                gc.enable()
        if elapsed > self._time_limit:
            self._over_budget = (f"{COST_LIMIT_EXCEEDED} (an evaluation took {elapsed * 1000:.0f} ms, "
                                 f"more than the {self._time_limit * 1000:.0f} ms allowed)")
            log.warning("CEL selector over its time budget, failing it from now on: %.200r: %s",
                        self.expression, self._over_budget)
            raise self._error(self._over_budget)
        if failure:
            raise self._error(failure)
        kind = result.type().name()
        if kind == "BOOL":
            return bool(result.value())
        if kind == "ERROR":
            raise self._error(runtime_message(str(result.value())))
        raise self._error(f"CEL result of type {type_name(kind, runtime=True)} could not be converted to bool")

    def _error(self, message: str) -> CELError:
        return CELError(message, self.expression, compile_error=False)


class SelectorCache:
    """Compiled selectors by expression text, the least recently used dropped first (upstream's cel.Cache)."""

    def __init__(self, size: int = CACHE_SIZE, *, time_limit: float = EVALUATION_TIME_LIMIT,
                 timer: Callable[[], float] = time.thread_time) -> None:
        self._size = size
        self._time_limit = time_limit
        # this thread's CPU seconds: the work an evaluation did, not time another thread or process took from it
        # (a loaded machine must not make a selector over budget); it measures and schedules nothing
        self._timer = timer
        self._entries: OrderedDict[str, Selector] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def compile(self, expression: str) -> Selector:
        """The cached Selector for ``expression``, compiled on a miss; raises CELError (not cached) if it fails."""
        with self._lock:
            hit = self._entries.get(expression)
            if hit is not None:
                self._entries.move_to_end(expression)
                return hit
        selector = Selector(expression, compile_program(expression), self._time_limit, self._timer)
        with self._lock:
            selector = self._entries.setdefault(expression, selector)
            self._entries.move_to_end(expression)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return selector


_CACHE = SelectorCache()


def compile_selector(expression: str) -> Selector:
    """The process's cached Selector for ``expression``; raises CELError with the compiler's message."""
    return _CACHE.compile(expression)


def compile_program(expression: str) -> Any:
    """A cel-expr-python program for ``expression``, type-checked, with upstream's empty-map domains."""
    size = len(expression.encode())
    if size > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
        raise CELError(f"compilation failed: expression is {size} bytes long, "
                       f"may not be more than {CEL_SELECTOR_EXPRESSION_MAX_LENGTH} bytes",
                       expression, compile_error=True)
    program = _compiled(expression, expression)     # errors point into the text as written
    rewritten = celrewrite.rewrite(expression)
    if rewritten != expression:
        try:
            program = _compiled(rewritten, expression)
        except CELError as err:     # a bug in the rewrite must not cost a valid selector; only unknown domains differ
            log.warning("CEL selector rewrite did not compile, using it as written: %.200r -> %.200r: %s",
                        expression, rewritten, err)
    return _bool_typed(program, expression)


def _compiled(text: str, expression: str) -> Any:
    try:
        return _env().compile(text)
    except RuntimeError as err:
        raise CELError(f"compilation failed: {status_message(str(err))}", expression, compile_error=True) from None


def _bool_typed(program: Any, expression: str) -> Any:
    result = program.return_type().name()
    if result not in ("BOOL", "DYN"):
        raise CELError(f"must evaluate to bool or the unknown type, not {type_name(result)}", expression,
                       compile_error=True)
    return program


# ---------------------------------------------------------------------------------------------- messages

_STATUS = re.compile(r"^[A-Z_]+: (.*?)(?: \[[A-Z_]+\])?$", re.DOTALL)


def status_message(status: str) -> str:
    """An absl status as cel-expr-python prints it (``INVALID_ARGUMENT: msg [INVALID_ARGUMENT]``), less the code."""
    m = _STATUS.match(status)
    return m.group(1) if m else status


_RUNTIME: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(r'^Key not found in map : "((?:[^"\\]|\\.)*)"$'),
     lambda m: "no such key: " + m.group(1).replace('\\"', '"').replace("\\\\", "\\")),
    (re.compile(r"^Key not found in map : (.*)$"), lambda m: f"no such key: {m.group(1)}"),
    (re.compile(r"^Iteration budget exceeded$"),
     lambda m: f"{COST_LIMIT_EXCEEDED} (more than {COMPREHENSION_ITERATION_BUDGET} comprehension iterations)"),
    (re.compile(r"^divide by zero$"), lambda m: "division by zero"),
    (re.compile(r"^No matching overloads found : (.*)$"),
     lambda m: "no such overload: " + re.sub(r"\b(u?int)64\b", r"\1", m.group(1))),
    (re.compile(r"^Index error: index=(-?\d+) size=(\d+)$"),
     lambda m: f"index '{m.group(1)}' out of range in list size '{m.group(2)}'"),
]


def runtime_message(status: str) -> str:
    """A cel-cpp evaluation error in cel-go's words where they differ (``no such key: model``)."""
    message = status_message(status)
    for pattern, say in _RUNTIME:
        m = pattern.match(message)
        if m:
            return say(m)
    return message


_TYPE_NAMES = {"NULL": "null_type", "DURATION": "google.protobuf.Duration", "TIMESTAMP": "google.protobuf.Timestamp",
               "LIST": "list", "MAP": "map", "TYPE": "type"}


def type_name(name: str, *, runtime: bool = False) -> str:
    """cel-expr-python's ``MAP<STRING, DYN>`` as cel-go says it: ``map(string, dyn)`` (a value's type: ``map``)."""
    base, _, params = name.partition("<")
    if runtime or not params:
        return _TYPE_NAMES.get(base, base.lower() if base.isupper() else base)
    inner = []
    depth, start = 0, 0
    params = params[:-1]
    for i, c in enumerate(params):
        depth += c == "<"
        depth -= c == ">"
        if c == "," and depth == 0:
            inner.append(params[start:i].strip())
            start = i + 1
    inner.append(params[start:].strip())
    return f"{type_name(base)}({', '.join(type_name(p) for p in inner)})"
