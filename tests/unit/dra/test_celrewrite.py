"""Domain lookups rewritten to default to an empty map (scheduler/dra/celrewrite.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.dra.celrewrite import default_domains, native_calls, rewrite, tokenize


@pytest.mark.parametrize("source, want", [
    pytest.param('device.attributes["d"].model', 'device.attributes[?"d"].orValue({}).model',
                 id="an index of the attributes becomes an optional index with an empty default"),
    pytest.param('device.capacity["d"].mem', 'device.capacity[?"d"].orValue({}).mem', id="so does one of capacity"),
    pytest.param('device.attributes.d', 'device.attributes[?"d"].orValue({})', id="a domain read as a field"),
    pytest.param('device . attributes [ "d" ] . x', 'device . attributes[?"d"].orValue({}) . x',
                 id="blanks between tokens are allowed"),
    pytest.param('device.attributes[?"d"]', 'optional.of(device.attributes[?"d"].orValue({}))',
                 id="an optional index stays a present optional"),
    pytest.param('device.attributes.?d', 'optional.of(device.attributes[?"d"].orValue({}))',
                 id="so does an optional field"),
    pytest.param('device.attributes[device.attributes["a"].k].x',
                 'device.attributes[?device.attributes[?"a"].orValue({}).k].orValue({}).x',
                 id="a lookup inside a key is rewritten too"),
    pytest.param('has(device.attributes.d)', 'true', id="has of a domain is true"),
    pytest.param('has(device.driver) && has(device.allowMultipleAllocations)', 'true && true',
                 id="has of a device field is true"),
    pytest.param('has(device.attributes.d.model)', 'has(device.attributes[?"d"].orValue({}).model)',
                 id="has of an id inside a domain tests the id"),
    pytest.param('cel.bind(a, device.attributes, a["d"].x)', 'cel.bind(a, device.attributes, a[?"d"].orValue({}).x)',
                 id="a name bound to the attributes is rewritten within the bind"),
    pytest.param('cel.bind(a, device.attributes, true) && a["d"]', 'cel.bind(a, device.attributes, true) && a["d"]',
                 id="but not after it"),
    pytest.param('"d" in device.attributes', '"d" in device.attributes', id="membership of a domain is left alone"),
    pytest.param('device.attributes.exists(d, d == "x")', 'device.attributes.exists(d, d == "x")',
                 id="a method call is left alone"),
    pytest.param('x.device.attributes["d"]', 'x.device.attributes["d"]', id="a field named device is left alone"),
    pytest.param('"device.attributes[\\"d\\"]" == r\'device.attributes["d"]\'',
                 '"device.attributes[\\"d\\"]" == r\'device.attributes["d"]\'', id="strings are left alone"),
    pytest.param('device.driver == "x" // device.attributes["d"]', 'device.driver == "x" // device.attributes["d"]',
                 id="comments are left alone"),
])
def test_domain_lookups_are_rewritten_and_nothing_else(source: str, want: str) -> None:
    assert default_domains(source) == want


def test_a_raw_string_ends_at_its_quote_whatever_backslashes_it_holds() -> None:
    assert [t.text for t in tokenize(r"r'a\' + device")] == [r"r'a\'", "+", "device"]


L, R = "__tandem_l", "__tandem_r"
BOTH = f"(type({L}) == kubernetes.Quantity || type({L}) == kubernetes.Semver) && type({L}) == type({R})"
Q40GI = 'kubernetes.Quantity{_v: "42949672960000000000", _k: "2002042949672960000000000"}'


@pytest.mark.parametrize("source, want", [
    pytest.param('quantity("40Gi")', Q40GI, id="a literal quantity becomes a message literal"),
    pytest.param('semver("v1.2", true)', 'kubernetes.Semver{_v: "1.2.0", _k: "00000000000000000001.'
                 '00000000000000000002.00000000000000000000~"}', id="so does a literal semver, normalized"),
    pytest.param('quantity("200K")', 'quantity("200K")', id="a literal that does not parse stays a call"),
    pytest.param('quantity(s)', 'quantity(s)', id="so does a value that is not a literal"),
    pytest.param('x.quantity("1")', 'x.quantity("1")', id="a method of that name is not the function"),
    pytest.param('a.b.isGreaterThan(c)', f"cel.bind({L}, a.b, cel.bind({R}, c, {BOTH} ? {L}._k > {R}._k : "
                 "tandem.noSuchOverloadBool()))", id="isGreaterThan compares the order keys"),
    pytest.param('m[k].f(x).isLessThan(c)', f"cel.bind({L}, m[k].f(x), cel.bind({R}, c, {BOTH} ? {L}._k < {R}._k : "
                 "tandem.noSuchOverloadBool()))", id="the receiver is the whole postfix chain"),
    pytest.param('!(a + b).compareTo(c)', f"!cel.bind({L}, (a + b), cel.bind({R}, c, {BOTH} ? ({L}._k < {R}._k ? -1 "
                 f": ({L}._k > {R}._k ? 1 : 0)) : tandem.noSuchOverloadInt()))",
                 id="a parenthesized receiver, and an operator before it stays outside"),
])
def test_comparisons_and_literal_constructors_become_cels_own(source: str, want: str) -> None:
    assert native_calls(source) == want


def test_a_comparison_inside_a_comparison_is_rewritten_too() -> None:
    inner = native_calls("b.isLessThan(c)")
    assert native_calls("a.isGreaterThan(b.isLessThan(c))") == native_calls("a.isGreaterThan(X)").replace("X", inner)


PIECES = ["device", ".", "attributes", "capacity", "driver", "[", "]", "(", ")", "{", "}", "?", ",", "has", "cel",
          "bind", "a", '"d"', "quantity", "semver", '"1Gi"', '"1.2.3"', "compareTo", "isGreaterThan", "x", "!", "1",
          "true", "&&", " ", "'", "//", "\n"]


@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_the_rewrites_never_fail_whatever_the_text(pieces: list[str]) -> None:
    """They run only on text that compiled; but a malformed one must come back as text, not as an exception."""
    assert isinstance(rewrite("".join(pieces)), str)
