"""Name and label validation with apimachinery's wording (``pkg/util/validation``).

Each ``is_*`` function returns the list of messages upstream's function of
the same name returns (empty when valid). Clients print these messages
verbatim, so the wording, including upstream's double space in
``RegexError``'s examples, is part of the contract. Lengths are Go's
``len()``: bytes of UTF-8.

A kind's name rule (:data:`NameRule`, upstream's ``ValidateNameFunc``) is
what its registry strategy checks ``metadata.name`` and
``metadata.generateName`` with; each kind's is in
:mod:`bench.simcluster.resources`. Observed on kube-apiserver 1.36.2:

* :func:`name_is_dns_subdomain`: most kinds (pods, nodes, volumes and claims,
  leases, Jobs, PodGroups, custom resources, events.k8s.io/v1 Events ...);
* :func:`name_is_dns_label`: Namespaces, Services (1.36's relaxed rule: a
  leading digit is allowed) and StatefulSets;
* :func:`name_only_dns_subdomain`: ReplicationControllers, validated with
  ``ValidateObjectMetaWithOpts``, which leaves ``generateName`` unchecked;
* :func:`rbac_name`: Roles, ClusterRoles and their bindings (``ValidateRBACName``
  is ``path.IsValidPathSegmentName``, prefix or not);
* none (``None``): core/v1 Events and PodDisruptionBudgets, whose strategies
  check no name at all.

Whatever the kind, ``rest.BeforeCreate`` then checks every name with
:func:`validate_path_segment_name`, once the strategy found nothing wrong:
that is all a name without a rule of its own must pass.
"""

from __future__ import annotations

import re
from typing import Callable

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


# ---------------------------------------------------------------------------- name rules

NameRule = Callable[[str, bool], list[str]]   # (name, is a generateName prefix) -> messages

# storage/names.SimpleNameGenerator: a generateName is cut to 58 characters before 5 random ones are appended
MAX_GENERATED_NAME_PREFIX = 63 - 5

_NAME_MAY_NOT_BE = (".", "..")
_NAME_MAY_NOT_CONTAIN = ("/", "%")


def mask_trailing_dash(name: str) -> str:
    """A generateName may end in '-': upstream replaces the last *two* characters by 'a' (sic) to check it."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return is_dns1123_subdomain(mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return is_dns1123_label(mask_trailing_dash(name) if prefix else name)


def name_only_dns_subdomain(name: str, prefix: bool) -> list[str]:
    """A DNS subdomain name, and any generateName (``ValidateObjectMetaWithOpts`` checks only the result)."""
    return [] if prefix else is_dns1123_subdomain(name)


def is_valid_path_segment_name(name: str) -> list[str]:
    """path.IsValidPathSegmentName: not '.' or '..', no '/' or '%': a name a URL path can carry."""
    if name in _NAME_MAY_NOT_BE:
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in _NAME_MAY_NOT_CONTAIN if c in name]


def validate_path_segment_name(name: str, prefix: bool) -> list[str]:
    """path.ValidatePathSegmentName: a prefix may be '.' or '..' (IsValidPathSegmentPrefix)."""
    if prefix:
        return [f"may not contain '{c}'" for c in _NAME_MAY_NOT_CONTAIN if c in name]
    return is_valid_path_segment_name(name)


def rbac_name(name: str, prefix: bool) -> list[str]:
    """ValidateRBACName: IsValidPathSegmentName for names and generateNames alike (so a generateName '..' fails)."""
    return is_valid_path_segment_name(name)
