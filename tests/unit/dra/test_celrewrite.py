"""Domain lookups rewritten to default to an empty map (scheduler/dra/celrewrite.py)."""

from __future__ import annotations

import pytest

from scheduler.dra.celrewrite import rewrite, tokenize


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
    assert rewrite(source) == want


def test_a_raw_string_ends_at_its_quote_whatever_backslashes_it_holds() -> None:
    assert [t.text for t in tokenize(r"r'a\' + device")] == [r"r'a\'", "+", "device"]
