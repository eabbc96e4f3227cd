"""The CEL environment of DRA device selectors (scheduler/dra/cel.py): what a selector sees, errors, cost, cache."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.dra.cel import (
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH, COST_LIMIT_EXCEEDED, CELError, DeviceView, SelectorCache, compile_selector,
    device_view, format_selector_error, type_name,
)

DRIVER = "gpu.example.com"


def make_device(attributes: dict[str, Any] | None = None, capacity: dict[str, str] | None = None,
                driver: str = DRIVER, **fields: Any) -> DeviceView:
    raw = {"name": "gpu-0", "attributes": attributes or {},
           "capacity": {name: {"value": v} for name, v in (capacity or {}).items()}, **fields}
    return device_view(driver, raw)


GPU = make_device(
    {"model": {"string": "a100"}, "cores": {"int": 128}, "mig": {"bool": True}, "driverVersion": {"version": "1.4.2"},
     "pcie.example.com/root": {"string": "pci0000:00"}, "gpu.example.com/family": {"string": "Ampere"}},
    {"memory": "80Gi", "nic.example.com/bandwidth": "100G"})


def run(expression: str, device: DeviceView = GPU) -> Any:
    """The selector's answer, or its CELError as ``compile: <text>`` / ``runtime: <text>``."""
    try:
        return compile_selector(expression).matches(device)
    except CELError as err:
        return f"{'compile' if err.compile_error else 'runtime'}: {err}"


def check(expression: str, want: Any, device: DeviceView = GPU) -> None:
    assert run(expression, device) == want, expression


# ---------------------------------------------------------------------------- what a selector sees

@pytest.mark.parametrize("expression, want", [
    pytest.param('device.driver == "gpu.example.com"', True, id="the driver is the slice's driver"),
    pytest.param('device.attributes["gpu.example.com"].model == "a100"', True,
                 id="an unqualified attribute belongs to the driver's domain"),
    pytest.param('device.attributes["gpu.example.com"].family == "Ampere"', True,
                 id="a name qualified with the driver's domain lands in the same map"),
    pytest.param('device.attributes["pcie.example.com"].root == "pci0000:00"', True,
                 id="a qualified attribute belongs to its own domain"),
    pytest.param('device.attributes["gpu.example.com"]["model"] == "a100"', True, id="an id can be indexed too"),
    pytest.param('device.attributes["gpu.example.com"].cores == 128 && device.attributes["gpu.example.com"].cores > 64',
                 True, id="an int attribute is an int"),
    pytest.param('device.attributes["gpu.example.com"].mig', True, id="a bool attribute can be the whole answer"),
    pytest.param('device.attributes["gpu.example.com"].driverVersion == semver("1.4.2")', True,
                 id="a version attribute is a semver"),
    pytest.param('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', True,
                 id="a version attribute compares as a semver"),
    pytest.param('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True,
                 id="a capacity is a quantity"),
    pytest.param('device.capacity["nic.example.com"].bandwidth == quantity("100G")', True,
                 id="a qualified capacity belongs to its own domain"),
    pytest.param('device.attributes.size() == 2 && device.capacity.size() == 2', True,
                 id="the outer maps hold the domains the device has"),
    pytest.param('device.attributes["gpu.example.com"].exists_one(k, k == "model")', True,
                 id="ids can be iterated"),
    pytest.param('device.allowMultipleAllocations == false', True,
                 id="allowMultipleAllocations is false when the device does not say"),
    pytest.param('cel.bind(gpu, device.attributes["gpu.example.com"], gpu.model == "a100" && gpu.mig)', True,
                 id="cel.bind names a domain once"),
])
def test_a_selector_sees_the_device_as_upstream_shows_it(expression: str, want: Any) -> None:
    check(expression, want)


@pytest.mark.parametrize("attribute, expression", [
    pytest.param({"int": -7}, "x == -7", id="int"),
    pytest.param({"bool": False}, "x == false", id="bool"),
    pytest.param({"string": "fish"}, 'x == "fish"', id="string"),
    pytest.param({"version": "1.0.0-rc.1+build.5"}, 'x == semver("1.0.0-rc.1")', id="version, build metadata aside"),
    pytest.param({"ints": [1, 2]}, "x == [1, 2]", id="the list kinds become lists"),
    pytest.param({"versions": ["1.0.0", "2.0.0"]}, 'x.all(v, v.isGreaterThan(semver("0.1.0")))',
                 id="a list of versions is a list of semvers"),
])
def test_each_attribute_kind_has_its_cel_type(attribute: dict[str, Any], expression: str) -> None:
    dev = make_device({"dra.example.com/x": attribute})
    check(f'cel.bind(x, device.attributes["dra.example.com"].x, {expression})', True, dev)


def test_allow_multiple_allocations_is_the_devices() -> None:
    check("device.allowMultipleAllocations", True, make_device(allowMultipleAllocations=True))


# ---------------------------------------------------------------------------- missing domains and attributes

@pytest.mark.parametrize("expression, want", [
    pytest.param('"nic.example.com" in device.attributes', False, id="an unknown domain is not in the outer map"),
    pytest.param('device.attributes["nic.example.com"] == {}', True, id="an unknown domain looks up as an empty map"),
    pytest.param('device.attributes["nic.example.com"].size() == 0', True, id="whose size is zero"),
    pytest.param('"model" in device.attributes["nic.example.com"]', False,
                 id="so 'in' on an unknown domain is false"),
    pytest.param('has(device.attributes["nic.example.com"].model)', False, id="so has() on an unknown domain is false"),
    pytest.param('device.attributes["nic.example.com"].?model.orValue("none") == "none"', True,
                 id="so optional chaining on an unknown domain takes the default"),
    pytest.param('device.attributes["nic.example.com"].model == "x"', "runtime: no such key: model",
                 id="reading an id of an unknown domain names the id"),
    pytest.param('device.attributes["gpu.example.com"].speed == 1', "runtime: no such key: speed",
                 id="reading an unknown id names the id"),
    pytest.param('device.attributes["gpu.example.com"]["speed"] == 1', "runtime: no such key: speed",
                 id="indexing an unknown id names the id"),
    pytest.param('"speed" in device.attributes["gpu.example.com"] && device.attributes["gpu.example.com"].speed > 1',
                 False, id="a guard with 'in' short-circuits the unknown id"),
    pytest.param('device.capacity["x.example.com"] == {}', True, id="capacity has the same empty map"),
    pytest.param('!("memory" in device.capacity["x.example.com"]) || '
                 'device.capacity["x.example.com"].memory.isGreaterThan(quantity("1Ki"))', True,
                 id="upstream's check-negative case"),
    pytest.param('device.attributes.nic == {}', True, id="a domain read as a field is an empty map too"),
    pytest.param('device.attributes[?"nic.example.com"].hasValue()', True,
                 id="an optional lookup of a domain is always present, as upstream's"),
    pytest.param('has(device.attributes.nic)', True, id="has() of a domain field is true, as upstream's"),
    pytest.param('has(device.driver)', True, id="has() of a device field is true"),
    pytest.param('cel.bind(a, device.attributes, a["nic.example.com"].size() == 0)', True,
                 id="a name bound to the attributes defaults too"),
])
def test_unknown_domains_look_up_as_empty_maps_and_unknown_ids_fail(expression: str, want: Any) -> None:
    check(expression, want)


# ---------------------------------------------------------------------------- quantity and semver

@pytest.mark.parametrize("expression", [
    pytest.param('quantity("200M").compareTo(quantity("0.2G")) == 0', id="compareTo is 0 for equal values"),
    pytest.param('quantity("50M").compareTo(quantity("50Mi")) == -1', id="compareTo is -1 below"),
    pytest.param('quantity("50Mi").compareTo(quantity("50M")) == 1', id="compareTo is 1 above"),
    pytest.param('quantity("150Mi").isGreaterThan(quantity("100Mi"))', id="isGreaterThan"),
    pytest.param('quantity("50M").isLessThan(quantity("100M"))', id="isLessThan"),
    pytest.param('quantity("1Gi") == quantity("1024Mi")', id="equality is by value, not by text"),
    pytest.param('quantity("1Gi") != quantity("1G")', id="binary and decimal units differ"),
    pytest.param('quantity("50k").asInteger() == 50000', id="asInteger"),
    pytest.param('quantity("50000000G").isInteger() && !quantity("1.5").isInteger()', id="isInteger"),
    pytest.param('!quantity("9999999999999999999999999999999999999G").isInteger()', id="isInteger is false past int64"),
    pytest.param('quantity("50k").sub(20000).asApproximateFloat() == 30000.0', id="sub an int, asApproximateFloat"),
    pytest.param('quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")', id="add and sub chain"),
    pytest.param('sign(quantity("-1m")) == -1 && sign(quantity("0")) == 0', id="sign"),
    pytest.param('isQuantity("1.3Gi") && !isQuantity("200K") && !isQuantity("1,3G")', id="isQuantity"),
    pytest.param('quantity("0.0000000001") == quantity("1n")', id="below a nano rounds up to one, as ParseQuantity"),
])
def test_quantity_functions_behave_as_upstreams(expression: str) -> None:
    check(expression, True)


@pytest.mark.parametrize("expression", [
    pytest.param('semver("1.2.3").compareTo(semver("1.2.3")) == 0', id="compareTo is 0 for equal versions"),
    pytest.param('semver("1.2.3").compareTo(semver("2.0.0")) == -1', id="compareTo is -1 below"),
    pytest.param('semver("1.10.0").isGreaterThan(semver("1.9.0"))', id="numbers compare as numbers"),
    pytest.param('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', id="a prerelease is below its release"),
    pytest.param('semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))',
                 id="numeric prerelease ids sort below alphanumeric ones"),
    pytest.param('semver("1.0.0-beta.11").isLessThan(semver("1.0.0-rc.1"))', id="prerelease ids compare in order"),
    pytest.param('semver("1.0.0+a") == semver("1.0.0+b")', id="equality ignores build metadata"),
    pytest.param('semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3',
                 id="major minor patch"),
    pytest.param('semver("v01.2", true) == semver("1.2.0")', id="normalize drops v and leading zeros, fills in"),
    pytest.param('isSemver("1.0.0") && !isSemver("v1.0") && isSemver("v1.0", true)', id="isSemver"),
])
def test_semver_functions_behave_as_upstreams(expression: str) -> None:
    check(expression, True)


# ---------------------------------------------------------------------------- strings and lists

@pytest.mark.parametrize("expression", [
    pytest.param('device.attributes["gpu.example.com"].family.lowerAscii() == "ampere"', id="lowerAscii"),
    pytest.param('"abc".upperAscii() == "ABC"', id="upperAscii"),
    pytest.param('device.attributes["gpu.example.com"].model.startsWith("a1")', id="startsWith"),
    pytest.param('"nvidia-a100".endsWith("a100") && "nvidia-a100".contains("-")', id="endsWith and contains"),
    pytest.param('device.attributes["pcie.example.com"].root.matches("^pci[0-9]{4}")', id="matches"),
    pytest.param('"a,b,c".split(",").size() == 3 && ["a", "b"].join("-") == "a-b"', id="split and join"),
    pytest.param('"a-b".replace("-", "_") == "a_b" && " x ".trim() == "x"', id="replace and trim"),
    pytest.param('"abc".substring(1) == "bc" && "abc".charAt(1) == "b" && "abca".lastIndexOf("a") == 3',
                 id="substring charAt lastIndexOf"),
    pytest.param('device.attributes["gpu.example.com"].model in ["a100", "h100"]', id="in a list"),
    pytest.param('[1, 2, 3].isSorted() && !["b", "a"].isSorted()', id="isSorted"),
    pytest.param('[1, 2, 3].sum() == 6 && [0.5, 1.0].sum() == 1.5', id="sum keeps the element type"),
    pytest.param('[3, 1, 2].min() == 1 && ["a", "c"].max() == "c"', id="min and max"),
    pytest.param('[1, 2, 3].map(x, x * 2).filter(x, x > 2).size() == 2', id="map and filter"),
    pytest.param('[1, 2, 3].all(x, x > 0) && [1, 2, 3].exists(x, x == 2)', id="all and exists"),
])
def test_string_and_list_helpers_work(expression: str) -> None:
    check(expression, True)


@pytest.mark.parametrize("expression", [
    pytest.param('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', id="compareTo"),
    pytest.param('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))', id="isGreaterThan"),
    pytest.param('device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("v2", true))',
                 id="isLessThan of a normalized version"),
])
def test_the_usual_comparisons_never_call_into_python(expression: str) -> None:
    """cel-expr-python 0.1.3 leaks the arguments of every call into Python; these make none (celrewrite.py)."""
    selector = compile_selector(expression)
    library = {str(Path(sys.modules[name].__file__ or ""))
               for name in ("scheduler.dra.cellib", "scheduler.dra.celvalues")}
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename in library:
            called.append(frame.f_code.co_name)
    sys.setprofile(profile)
    try:
        assert selector.matches(GPU) is True
    finally:
        sys.setprofile(None)
    assert called == []


# ---------------------------------------------------------------------------- errors

@pytest.mark.parametrize("expression, want", [
    pytest.param("1 +", "compilation failed: ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>' expecting "
                 "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
                 "BYTES, IDENTIFIER}\n | 1 +\n | ...^", id="a syntax error points into the text"),
    pytest.param('device.nosuch == 1', "compilation failed: ERROR: <input>:1:7: undeclared reference to "
                 "'device.nosuch' (in container '')\n | device.nosuch == 1\n | ......^",
                 id="an unknown device field is an undeclared reference"),
    pytest.param('quantity("1") == 1', "compilation failed: ERROR: <input>:1:15: found no matching overload for "
                 "'_==_' applied to '(kubernetes.Quantity, int)'\n | quantity(\"1\") == 1\n | ..............^",
                 id="a quantity is not an int"),
    pytest.param("1", "must evaluate to bool or the unknown type, not int", id="an int result does not compile"),
    pytest.param("device.driver", "must evaluate to bool or the unknown type, not string",
                 id="a string result does not compile"),
    pytest.param('device.attributes["gpu.example.com"]',
                 "must evaluate to bool or the unknown type, not map(string, dyn)", id="a map result does not compile"),
    pytest.param("[true]", "must evaluate to bool or the unknown type, not list(bool)",
                 id="a list result does not compile"),
])
def test_compile_errors_read_as_upstreams(expression: str, want: str) -> None:
    with pytest.raises(CELError) as info:
        compile_selector(expression)
    assert info.value.compile_error and str(info.value) == want and info.value.expression == expression


def test_a_failed_compile_is_not_cached_and_fails_again() -> None:
    cache = SelectorCache()
    for _ in range(2):
        with pytest.raises(CELError):
            cache.compile("1 +")
    assert len(cache) == 0


@pytest.mark.parametrize("expression, want", [
    pytest.param('device.attributes["gpu.example.com"].model', "CEL result of type string could not be converted "
                 "to bool", id="a string at run time is not a bool"),
    pytest.param('device.attributes["gpu.example.com"].cores / 0 == 1', "division by zero", id="division by zero"),
    pytest.param('device.attributes["gpu.example.com"].model > 1', "no such overload: _>_(string, int)",
                 id="comparing a string attribute with an int"),
    pytest.param('quantity("200K").isInteger()', "unable to parse quantity's suffix",
                 id="an invalid quantity says ParseQuantity's words"),
    pytest.param('semver("v1.0.0").major() == 1', 'Invalid character(s) found in major number "v1"',
                 id="an invalid version says blang semver's words"),
    pytest.param('quantity("1.5").asInteger() == 1', "cannot convert value to integer",
                 id="asInteger of a fraction"),
    pytest.param("[].min() == 1", "min called on empty list", id="min of nothing"),
    pytest.param('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(quantity("1"))',
                 "no such overload", id="a version compared with a quantity"),
    pytest.param('device.attributes["gpu.example.com"].cores.compareTo(semver("1.0.0")) == 0', "no such overload",
                 id="an int compared with a version"),
    pytest.param("[1][2] == 1", "index '2' out of range in list size '1'", id="an index past the end"),
])
def test_runtime_errors_read_as_upstreams(expression: str, want: str) -> None:
    check(expression, f"runtime: {want}")


@pytest.mark.parametrize("attribute, want", [
    pytest.param({"version": "v1.0.0"}, 'attribute v: parse semantic version: Invalid character(s) found in major '
                 'number "v1"', id="an invalid version attribute fails every selector on the device"),
    pytest.param({}, "attribute v: unsupported attribute value", id="an attribute without a value"),
])
def test_a_device_upstream_cannot_convert_fails_its_selectors(attribute: dict[str, Any], want: str) -> None:
    check("true", f"runtime: {want}", make_device({"v": attribute}))


def test_format_selector_error_writes_upstreams_allocator_messages() -> None:
    with pytest.raises(CELError) as compile_err:
        compile_selector("1")
    with pytest.raises(CELError) as runtime_err:
        compile_selector('device.attributes["gpu.example.com"].speed > 1').matches(GPU)
    assert format_selector_error("class gpu", 0, compile_err.value) == \
        "class gpu: selector #0: CEL compile error: must evaluate to bool or the unknown type, not int"
    assert format_selector_error("claim ns/c", 1, runtime_err.value, "gpu.example.com/pool/gpu-0") == (
        "claim ns/c: selector #1 on device gpu.example.com/pool/gpu-0: CEL runtime error: no such key: speed. "
        "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for "
        "optional fields")


@pytest.mark.parametrize("name, want", [
    pytest.param("MAP<STRING, LIST<INT>>", "map(string, list(int))", id="nested parameters"),
    pytest.param("kubernetes.Quantity", "kubernetes.Quantity", id="a message keeps its name"),
    pytest.param("NULL", "null_type", id="null"),
])
def test_type_names_are_cel_gos(name: str, want: str) -> None:
    assert type_name(name) == want


# ---------------------------------------------------------------------------- cost

NESTED = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"


def test_a_big_comprehension_trips_the_cost_limit() -> None:
    expression = NESTED
    body = "x4 > 0"
    for v in ("x4", "x3", "x2", "x1"):
        body = f"{NESTED}.all({v}, {body})"
    expression = body       # 10^4 iterations, past cel-cpp's budget of 10,000
    assert run(expression) == f"runtime: {COST_LIMIT_EXCEEDED} (more than 10000 comprehension iterations)"


def test_upstreams_expensive_case_trips_the_cost_limit() -> None:
    body = "int('1'.size()) < 100"
    for v in ("z5", "z4", "z3", "z2", "z", "y", "x"):
        body = f"{NESTED}.all({v}, {body})"
    assert str(run(body)).startswith(f"runtime: {COST_LIMIT_EXCEEDED}")


def test_a_comprehension_within_the_budget_runs() -> None:
    check(f"{NESTED}.all(x, {NESTED}.all(y, {NESTED}.all(z, x + y + z > 0)))", True)


def test_a_slow_evaluation_fails_and_fails_the_selector_from_then_on() -> None:
    ticks = itertools.chain([0.0, 1.0], itertools.count(2.0))      # the first evaluation "takes" one second
    calls = []

    def timer() -> float:
        calls.append(1)
        return next(ticks)

    selector = SelectorCache(time_limit=0.1, timer=timer).compile("true")
    want = f"{COST_LIMIT_EXCEEDED} (an evaluation took 1000 ms, more than the 100 ms allowed)"
    for _ in range(2):
        with pytest.raises(CELError) as info:
            selector.matches(GPU)
        assert str(info.value) == want
    assert len(calls) == 2, "the second evaluation did not run"


def test_an_expression_longer_than_upstreams_limit_does_not_compile() -> None:
    expression = "true || " * (CEL_SELECTOR_EXPRESSION_MAX_LENGTH // 8) + "true"
    assert run(expression) == (f"compile: compilation failed: expression is {len(expression)} bytes long, "
                               f"may not be more than {CEL_SELECTOR_EXPRESSION_MAX_LENGTH} bytes")


# ---------------------------------------------------------------------------- cache

def test_compiling_the_same_text_twice_returns_the_cached_selector() -> None:
    text = 'device.driver == "cache.example.com"'
    assert compile_selector(text) is compile_selector(text)


def test_the_cache_drops_the_least_recently_used_selector() -> None:
    cache = SelectorCache(size=2)
    a, b = cache.compile("true"), cache.compile("false")
    assert cache.compile("true") is a           # "true" is now the most recently used
    cache.compile("1 == 1")                     # so "false" goes
    assert len(cache) == 2 and cache.compile("true") is a and cache.compile("false") is not b


# ---------------------------------------------------------------------------- property: agrees with Python

DOMAINS = ("gpu.example.com", "nic.example.com", "x.example.com")
IDS = ("model", "count", "fast")
VALUES = st.one_of(st.integers(-2, 2), st.sampled_from(["a", "b", ""]), st.booleans())
ERROR = "error"


def _kind(v: Any) -> str:
    return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "string"


def _lit(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else f'"{v}"' if isinstance(v, str) else str(v)


def _eq(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b        # CEL: 1 != true, 1 != "1", and no error for either


@st.composite
def devices(draw: st.DrawFn) -> tuple[str, dict[str, dict[str, Any]], dict[str, Any]]:
    """(driver, domain -> id -> value, raw attributes), each id under a qualified or unqualified name."""
    driver = draw(st.sampled_from(DOMAINS[:2]))
    values: dict[str, dict[str, Any]] = {}
    raw: dict[str, Any] = {}
    for domain in DOMAINS:
        for ident in IDS:
            if draw(st.booleans()):
                v = draw(VALUES)
                values.setdefault(domain, {})[ident] = v
                name = ident if domain == driver and draw(st.booleans()) else f"{domain}/{ident}"
                raw[name] = {_kind(v): v}
    return driver, values, raw


def _atoms() -> st.SearchStrategy[tuple[str, Any]]:
    """(CEL text, model) where model(driver, values) is True, False or ERROR."""
    dom, ident = st.sampled_from(DOMAINS), st.sampled_from(IDS)

    def driver_is(d: str) -> tuple[str, Any]:
        return f'device.driver == "{d}"', lambda drv, vals: drv == d

    def equals(d: str, i: str, v: Any) -> tuple[str, Any]:
        return (f'device.attributes["{d}"].{i} == {_lit(v)}',
                lambda drv, vals: _eq(vals[d][i], v) if i in vals.get(d, {}) else ERROR)

    def one_of(d: str, i: str, vs: list[Any]) -> tuple[str, Any]:
        return (f'device.attributes["{d}"].{i} in [{", ".join(map(_lit, vs))}]',
                lambda drv, vals: any(_eq(vals[d][i], v) for v in vs) if i in vals.get(d, {}) else ERROR)

    def present(d: str, i: str) -> tuple[str, Any]:
        return f'"{i}" in device.attributes["{d}"]', lambda drv, vals: i in vals.get(d, {})

    def or_value(d: str, i: str, default: Any, v: Any) -> tuple[str, Any]:
        return (f'device.attributes["{d}"].?{i}.orValue({_lit(default)}) == {_lit(v)}',
                lambda drv, vals: _eq(vals.get(d, {}).get(i, default), v))

    return st.one_of(
        st.builds(driver_is, st.sampled_from(DOMAINS)),
        st.builds(equals, dom, ident, VALUES),
        st.builds(one_of, dom, ident, st.one_of(st.lists(st.integers(-2, 2), min_size=1, max_size=3),
                                                 st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2))),
        st.builds(present, dom, ident),
        st.builds(or_value, dom, ident, VALUES, VALUES),
    )


def _not(p: tuple[str, Any]) -> tuple[str, Any]:
    text, f = p

    def model(drv: str, vals: Any) -> Any:
        r = f(drv, vals)
        return ERROR if r is ERROR else not r
    return f"!({text})", model


def _logic(op: str, p: tuple[str, Any], q: tuple[str, Any]) -> tuple[str, Any]:
    """CEL's && and || are commutative over errors: false && error is false, true || error is true."""
    absorbing = op == "||"

    def model(drv: str, vals: Any) -> Any:
        a, b = p[1](drv, vals), q[1](drv, vals)
        if a is absorbing or b is absorbing:
            return absorbing
        return ERROR if ERROR in (a, b) else not absorbing
    return f"({p[0]}) {op} ({q[0]})", model


PREDICATES = st.recursive(_atoms(), lambda inner: st.one_of(
    st.builds(_not, inner),
    st.builds(_logic, st.just("&&"), inner, inner),
    st.builds(_logic, st.just("||"), inner, inner)), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(devices(), PREDICATES)
def test_a_selector_agrees_with_the_same_predicate_in_python(device: Any, predicate: tuple[str, Any]) -> None:
    driver, values, raw = device
    text, model = predicate
    want = model(driver, values)
    got = run(text, device_view(driver, {"name": "d", "attributes": raw}))
    if want is ERROR:
        assert isinstance(got, str) and got.startswith("runtime: no such key: "), (text, raw, got)
    else:
        assert got is want, (text, raw, got)
