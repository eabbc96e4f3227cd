"""Fault injection for the simulated cluster: the failures a scheduler must survive.

Rules match a request by verb (get, list, watch, create, update, patch,
delete, deletecollection, or ``*``) and resource (``pods``, ``pods/binding``,
``podgroups.scheduling.x-k8s.io``, or ``*``) and can add latency, fail a
fraction of requests with a 5xx Status, or throttle a fraction with 429 and
Retry-After. Watches can be cut every N seconds. All of it is set at start
(CLI ``--fault``) and changeable while running (``PUT /simcluster/faults``
or :meth:`Faults.update`).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from typing import Any

from bench.simcluster import errors
from bench.simcluster.resources import RESOURCES

_ERROR_REASONS = {500: "InternalError", 502: "BadGateway", 503: "ServiceUnavailable", 504: "Timeout"}
VERBS = ("*", "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@lru_cache(maxsize=1)
def resource_labels() -> frozenset[str]:
    """Every resource name a rule can match, as the server labels requests (plural[/sub][.group])."""
    out = set()
    for rt in RESOURCES:
        for sub in ("", *rt.subresources):
            out.add(rt.label(sub))
    return frozenset(out)


@dataclass(slots=True)
class FaultRule:
    verb: str = "*"
    resource: str = "*"
    error_rate: float = 0.0   # fraction of matching requests answered with error_code
    error_code: int = 500
    throttle_rate: float = 0.0  # fraction answered 429 TooManyRequests
    retry_after: int = 1
    latency: float = 0.0      # seconds added before the request is served

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            want = (int,) if f.type == "int" else (int, float) if f.type == "float" else (str,)
            if not isinstance(v, want) or isinstance(v, bool):
                raise ValueError(f"fault rule field {f.name}: {v!r} is not a {f.type}")
            if f.type == "float":
                setattr(self, f.name, float(v))
        if self.verb not in VERBS:
            raise ValueError(f"fault rule field verb: {self.verb!r} is not one of {', '.join(VERBS)}")
        if self.resource != "*" and self.resource not in resource_labels():
            raise ValueError(f"fault rule field resource: {self.resource!r} is not a served resource "
                             f"(e.g. pods, pods/binding, podgroups.scheduling.x-k8s.io) or *")
        for name in ("error_rate", "throttle_rate"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"fault rule field {name}: {v} is not a fraction between 0 and 1")
        if self.error_code not in _ERROR_REASONS:
            raise ValueError(f"fault rule field error_code: {self.error_code} is not one of {sorted(_ERROR_REASONS)}")
        if self.latency < 0 or self.retry_after < 0:
            raise ValueError("fault rule fields latency and retry_after must not be negative")

    def matches(self, verb: str, resource: str) -> bool:
        return (self.verb == "*" or self.verb == verb) and (self.resource == "*" or self.resource == resource)

    @classmethod
    def from_dict(cls, d: Any) -> "FaultRule":
        if not isinstance(d, dict):
            raise ValueError(f"fault rule must be an object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"fault rule: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        try:
            return cls(**d)
        except TypeError as exc:
            raise ValueError(f"fault rule: {exc}") from None

    @classmethod
    def parse(cls, spec: str) -> "FaultRule":
        """CLI form ``VERB:RESOURCE:key=value,key=value``, e.g. ``create:pods/binding:error_rate=0.1``."""
        parts = spec.split(":", 2)
        if len(parts) != 3:
            raise ValueError(f"--fault {spec!r}: expected VERB:RESOURCE:key=value[,key=value]")
        d: dict[str, Any] = {"verb": parts[0] or "*", "resource": parts[1] or "*"}
        for item in filter(None, parts[2].split(",")):
            k, sep, v = item.partition("=")
            if not sep:
                raise ValueError(f"--fault {spec!r}: {item!r} is not key=value")
            try:
                d[k] = int(v) if k in ("error_code", "retry_after") else float(v)
            except ValueError:
                raise ValueError(f"--fault {spec!r}: {k}={v!r} is not a number") from None
        return cls.from_dict(d)


@dataclass(slots=True)
class Faults:
    rules: list[FaultRule] = field(default_factory=list)
    watch_drop_interval: float = 0.0  # seconds; 0 = never cut watches
    seed: int | None = None
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        if self.seed is not None:
            self._rng.seed(self.seed)

    def decide(self, verb: str, resource: str) -> tuple[float, errors.APIError | None]:
        """Latency to add and the error to answer with (None: serve normally)."""
        if not self.rules:
            return 0.0, None
        latency = 0.0
        for rule in self.rules:
            if not rule.matches(verb, resource):
                continue
            latency += rule.latency
            if rule.throttle_rate and self._rng.random() < rule.throttle_rate:
                return latency, errors.too_many_requests(rule.retry_after)
            if rule.error_rate and self._rng.random() < rule.error_rate:
                code = rule.error_code
                return latency, errors.APIError(code, _ERROR_REASONS[code],
                                                f"injected fault: {verb} {resource}")
        return latency, None

    def to_dict(self) -> dict[str, Any]:
        return {"rules": [asdict(r) for r in self.rules], "watch_drop_interval": self.watch_drop_interval}

    def update(self, d: Any) -> None:
        """Replace the configuration from a dict (the admin endpoint's body). All or nothing."""
        if not isinstance(d, dict):
            raise ValueError("faults must be an object with rules and watch_drop_interval")
        unknown = set(d) - {"rules", "watch_drop_interval"}
        if unknown:
            raise ValueError(f"faults: unknown field(s) {sorted(unknown)}")
        raw_rules = d.get("rules", [])
        if not isinstance(raw_rules, list):
            raise ValueError(f"faults: rules must be a list of rule objects, got {type(raw_rules).__name__}")
        rules = [FaultRule.from_dict(r) for r in raw_rules]
        interval = d.get("watch_drop_interval", 0.0)
        if not isinstance(interval, (int, float)) or isinstance(interval, bool):
            raise ValueError(f"faults: watch_drop_interval must be a number of seconds, got {interval!r}")
        interval = float(interval)
        if interval < 0:
            raise ValueError("faults: watch_drop_interval must not be negative")
        self.rules = rules
        self.watch_drop_interval = interval

    def clear(self) -> None:
        self.rules = []
        self.watch_drop_interval = 0.0
