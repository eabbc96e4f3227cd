"""API errors of the simulated cluster, shaped like kube-apiserver's.

Every failure the stand-in answers with is an :class:`APIError` that renders
as a ``meta/v1 Status`` object with the same ``code``, ``reason``, message
wording and ``details`` the real server uses (k8s.io/apimachinery
``pkg/api/errors``), because clients branch on those (a reflector relists on
410 Expired, a binder treats 409 Conflict as "already bound", kubectl prints
the message verbatim).

Nothing in here may raise anything but :class:`APIError`; the HTTP layer
turns any other exception into a 500 InternalError so the server never dies
on bad input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class FieldError:
    """One cause of a 422 Invalid, as ``field.Error`` in apimachinery.

    ``type`` is the cause reason (``FieldValueRequired``, ``FieldValueInvalid``,
    ``FieldValueForbidden``, ``FieldValueNotSupported``, ``FieldValueDuplicate``);
    ``detail`` is the text after the type's own words.
    """

    field: str
    type: str
    detail: str = ""
    value: Any = None

    _WORDS = {
        "FieldValueRequired": "Required value",
        "FieldValueInvalid": "Invalid value",
        "FieldValueForbidden": "Forbidden",
        "FieldValueNotSupported": "Unsupported value",
        "FieldValueDuplicate": "Duplicate value",
        "FieldValueTooLong": "Too long",
        "FieldValueTooMany": "Too many",
        "FieldValueTypeInvalid": "Invalid value",
        "FieldValueNotFound": "Not found",
    }

    def message(self) -> str:
        words = self._WORDS.get(self.type, self.type)
        if self.type in ("FieldValueInvalid", "FieldValueNotSupported", "FieldValueDuplicate",
                         "FieldValueTypeInvalid", "FieldValueTooMany", "FieldValueNotFound"):
            words = f"{words}: {_render_value(self.value)}"
        if self.detail:
            return f"{words}: {self.detail}"
        return words

    def text(self) -> str:
        return f"{self.field}: {self.message()}"


class GoValue(str):
    """A value already printed as ``field.Error`` prints it: the JSON of an internal Go struct, whose field names
    are Go's (internal types carry no json tags), as kube-apiserver's "field is immutable" errors show one."""


def _render_value(value: Any) -> str:
    if isinstance(value, GoValue):
        return str(value)
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value).decode()


def required(field: str, detail: str = "") -> FieldError:
    return FieldError(field, "FieldValueRequired", detail)


def invalid_value(field: str, value: Any, detail: str = "") -> FieldError:
    return FieldError(field, "FieldValueInvalid", detail, value)


def forbidden_field(field: str, detail: str) -> FieldError:
    return FieldError(field, "FieldValueForbidden", detail)


def not_supported(field: str, value: Any, supported: list[str]) -> FieldError:
    quoted = ", ".join(f'"{s}"' for s in supported)
    return FieldError(field, "FieldValueNotSupported", f"supported values: {quoted}", value)


def duplicate(field: str, value: Any) -> FieldError:
    """field.Duplicate: ``Duplicate value: "a"``."""
    return FieldError(field, "FieldValueDuplicate", "", value)


def field_not_found(field: str, value: Any, detail: str = "") -> FieldError:
    """field.NotFound (with the detail some callers add): ``Not found: "zz": must be one of ...``."""
    return FieldError(field, "FieldValueNotFound", detail, value)


def too_long(field: str, limit: int) -> FieldError:
    """field.TooLong, as 1.36 words it: ``Too long: may not be more than 63 bytes`` (the value is not shown)."""
    return FieldError(field, "FieldValueTooLong", f"may not be more than {limit} bytes")


def too_many(field: str, actual: int, limit: int) -> FieldError:
    """field.TooMany: ``Too many: 2: must have at most 1 item``."""
    return FieldError(field, "FieldValueTooMany", f"must have at most {limit} item{'' if limit == 1 else 's'}", actual)


class APIError(Exception):
    """An error response: HTTP ``code`` plus a Status ``reason``."""

    def __init__(self, code: int, reason: str, message: str,
                 details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        }
        if self.reason:  # StatusReasonUnknown is "" and omitted, as the real server omits it
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        return body

    def body(self) -> bytes:
        return orjson.dumps(self.status())

    def __repr__(self) -> str:
        return f"APIError({self.code}, {self.reason!r}, {self.message!r})"


def _qualified(resource: str, group: str) -> str:
    # apimachinery prints GroupResource.String(): "pods" or "podgroups.scheduling.x-k8s.io"
    return f"{resource}.{group}" if group else resource


def _details(name: str, resource: str, group: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "kind": resource}
    if group:
        d["group"] = group
    return d


def not_found(resource: str, name: str, group: str = "") -> APIError:
    return APIError(404, "NotFound", f'{_qualified(resource, group)} "{name}" not found',
                    _details(name, resource, group))


def already_exists(resource: str, name: str, group: str = "") -> APIError:
    return APIError(409, "AlreadyExists", f'{_qualified(resource, group)} "{name}" already exists',
                    _details(name, resource, group))


def conflict(resource: str, name: str, why: str, group: str = "") -> APIError:
    return APIError(409, "Conflict",
                    f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
                    _details(name, resource, group))


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, name: str, causes: list[FieldError], group: str = "") -> APIError:
    """422 Invalid: ``Pod "x" is invalid: spec.foo: Required value``.

    The message names each distinct cause once (ErrorList.ToAggregate drops repeats); ``details.causes``
    keeps them all.
    """
    texts = list(dict.fromkeys(c.text() for c in causes))
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified_kind = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": c.type, "message": c.message(), "field": c.field} for c in causes],
    }
    if group:
        details["group"] = group
    return APIError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {joined}', details)


def bad_request(message: str) -> APIError:
    return APIError(400, "BadRequest", message)


def forbidden(resource: str, name: str, why: str, group: str = "") -> APIError:
    return APIError(403, "Forbidden", f'{_qualified(resource, group)} "{name}" is forbidden: {why}',
                    _details(name, resource, group))


def expired(message: str) -> APIError:
    return APIError(410, "Expired", message)


def too_many_requests(retry_after: int) -> APIError:
    return APIError(429, "TooManyRequests", "Too many requests, please try again later.",
                    {"retryAfterSeconds": retry_after},
                    headers={"Retry-After": str(retry_after)})


def internal_error(message: str) -> APIError:
    return APIError(500, "InternalError", f"Internal error occurred: {message}",
                    {"causes": [{"message": message}]})


def service_unavailable(message: str) -> APIError:
    return APIError(503, "ServiceUnavailable", message)


def method_not_allowed(verb: str, resource: str) -> APIError:
    return APIError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource",
                    {"kind": resource, "causes": [{"message": verb}]})


def unsupported_media_type() -> APIError:
    """A request whose Content-Type no route of a built-in resource consumes.

    go-restful refuses it before any handler runs (``415: Unsupported Media
    Type``), and kube-apiserver's service error handler wraps that text with
    ``NewGenericServerResponse``: reason UnsupportedMediaType, the message
    kept verbatim, empty details. Custom resources are not served by go-restful,
    so their PATCH handler answers with the list of accepted types instead.
    """
    return APIError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})


def path_not_found() -> APIError:
    # kube-apiserver's answer for an unknown path or resource: the body is a Status, reason NotFound.
    return APIError(404, "NotFound", "the server could not find the requested resource",
                    {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]})
