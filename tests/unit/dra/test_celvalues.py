"""Quantity and Semver values for CEL (scheduler/dra/celvalues.py): upstream's parsing, and order keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.dra.celvalues import (
    ERR_FORMAT_WRONG, ERR_SUFFIX, ParseError, compare_versions, parse_nanos, parse_semver, quantity_key, semver_key,
)


@pytest.mark.parametrize("text, nanos", [
    pytest.param("40Gi", 40 * 2**30 * 10**9, id="a binary suffix"),
    pytest.param("1.5G", 15 * 10**17, id="a decimal suffix with a fraction"),
    pytest.param("100m", 10**8, id="milli"),
    pytest.param("1e3", 10**12, id="an exponent"),
    pytest.param("0.0000000001", 1, id="below a nano rounds away from zero"),
    pytest.param("-0.0000000001", -1, id="on both sides"),
    pytest.param("99999999999999999999999Ki", (2**63 - 1) * 10**9, id="a binary value caps at 2^63-1"),
])
def test_quantities_parse_as_parse_quantity_reads_them(text: str, nanos: int) -> None:
    assert parse_nanos(text) == nanos


@pytest.mark.parametrize("text, error", [
    pytest.param("200K", ERR_SUFFIX, id="an unknown suffix"),
    pytest.param("Three", ERR_FORMAT_WRONG, id="no number"),
    pytest.param(" 1", ERR_FORMAT_WRONG, id="blanks are not trimmed"),
])
def test_a_bad_quantity_fails_with_apimachinerys_words(text: str, error: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nanos(text)
    assert str(info.value) == error


@pytest.mark.parametrize("text, error", [
    pytest.param("1.2", "No Major.Minor.Patch elements found", id="two parts"),
    pytest.param("v1.2.3", 'Invalid character(s) found in major number "v1"', id="a v prefix"),
    pytest.param("01.2.3", 'Major number must not contain leading zeroes "01"', id="a leading zero"),
    pytest.param("1.2.3-", "Prerelease is empty", id="an empty prerelease"),
    pytest.param("1.2.3-01", 'Numeric PreRelease version must not contain leading zeroes "01"',
                 id="a leading zero in a numeric prerelease identifier"),
    pytest.param("1.2.3+", "Build meta data is empty", id="empty build metadata"),
])
def test_a_bad_version_fails_with_blang_semvers_words(text: str, error: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_semver(text)
    assert str(info.value) == error


def test_normalize_drops_the_v_and_leading_zeros_and_fills_in() -> None:
    assert parse_semver("v01.2", normalize=True) == (1, 2, 0, ())


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


NANOS = st.one_of(st.integers(-10**40, 10**40), st.integers(-1000, 1000))


@given(NANOS, NANOS)
def test_quantity_keys_sort_as_the_quantities(a: int, b: int) -> None:
    ka, kb = quantity_key(a), quantity_key(b)
    assert _sign((ka > kb) - (ka < kb)) == _sign(a - b)


IDENT = st.one_of(st.integers(0, 10**20), st.text("abAB-01", min_size=1, max_size=4).filter(lambda s: not s.isdigit()))
VERSIONS = st.tuples(st.integers(0, 3), st.integers(0, 12), st.integers(0, 3), st.lists(IDENT, max_size=3).map(tuple))


@given(VERSIONS, VERSIONS)
def test_semver_keys_sort_as_blang_semver_compares(a: tuple, b: tuple) -> None:
    ka, kb = semver_key(a), semver_key(b)
    assert (ka > kb) - (ka < kb) == compare_versions(a, b)
