"""Name and label validation with apimachinery's wording (``pkg/util/validation``).

Each ``is_*`` function returns the list of messages upstream's function of
the same name returns (empty when valid). Clients print these messages
verbatim, so the wording, including upstream's double space in
``RegexError``'s examples, is part of the contract. Lengths are Go's
``len()``: bytes of UTF-8.
"""

from __future__ import annotations

import re

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL_RE = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_RE = re.compile(QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(LABEL_VALUE_FMT)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, double space after each example's comma included."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def max_bytes_error(n: int) -> str:
    """1.36 counts label keys and values, and qualified names, in bytes, and says so (DNS names: characters)."""
    return f"must be no more than {n} bytes"


def byte_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


_QUALIFIED_NAME_ERR = ("must consist of alphanumeric characters, '-', '_' or '.', "
                       "and must start and end with an alphanumeric character")
DNS1123_LABEL_ERROR = regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character", DNS1123_LABEL_FMT, "my-name", "123-abc")
DNS1123_SUBDOMAIN_ERROR = regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character", DNS1123_SUBDOMAIN_FMT, "example.com")
_QUALIFIED_NAME_REGEX_ERROR = regex_error(_QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
_LABEL_VALUE_ERROR = regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character", LABEL_VALUE_FMT, "MyValue", "my_value", "12345")


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if byte_len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append("must not contain dots" if _DNS1123_SUBDOMAIN_RE.fullmatch(value) else DNS1123_LABEL_ERROR)
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if byte_len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(DNS1123_SUBDOMAIN_ERROR)
    return errs


def is_qualified_name(value: str) -> list[str]:
    """An optional DNS-subdomain prefix and '/', then a name of at most 63 bytes."""
    return _prefixed_name(value, "a qualified name ")


def is_label_key(value: str) -> list[str]:
    """IsLabelKey: a qualified name, worded as a label key (newer apimachinery)."""
    return _prefixed_name(value, "a valid label key ")


def _prefixed_name(value: str, shape: str) -> list[str]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = value
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [shape + _QUALIFIED_NAME_REGEX_ERROR
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif byte_len(name) > 63:
        errs.append("name part " + max_bytes_error(63))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + _QUALIFIED_NAME_REGEX_ERROR)
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs = []
    if byte_len(value) > 63:
        errs.append(max_bytes_error(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_LABEL_VALUE_ERROR)
    return errs
