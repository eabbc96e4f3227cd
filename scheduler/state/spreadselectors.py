"""What selects a pod for PodTopologySpread's system default constraints.

With ``defaultingType: System`` (the default), kube-scheduler spreads a pod
that names no topology spread constraints of its own over the pods its
Services and its controller select. Upstream builds that selector per pod
with ``helper.DefaultSelector`` (pkg/scheduler/framework/plugins/helper/
spread.go) from four listers:

* the ``spec.selector`` maps of every Service in the pod's namespace that
  selects the pod, merged (a Service without a selector selects nothing);
* then, if the pod's controller (its ownerReference with ``controller:
  true``) is a ``v1`` ReplicationController, that controller's
  ``spec.selector`` map, merged over them;
* or, if it is an ``apps/v1`` ReplicaSet or StatefulSet, the requirements
  of its ``spec.selector`` (a metav1.LabelSelector), added to them.

A selector that ends up empty means no default constraints for the pod.

:class:`SpreadSelectors` is those four listers, kept from informer events:
per namespace and name, the Services' and ReplicationControllers' selector
maps and the ReplicaSets' and StatefulSets' ``spec.selector`` as the API
has it. Handlers are O(1) in the number of stored objects and never raise
on a malformed object: it is logged and holds no selector, as upstream's
typed informer could not have decoded it. ``version`` changes whenever an
answer of :meth:`SpreadSelectors.default_selector` may change, so plugins
can cache per pod shape and drop the cache when it moves.

This module reads only objects handed to it; it does no I/O and must stay
free of anything asynchronous.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Iterable, Mapping

from scheduler.model import OwnerRef

log = logging.getLogger("tandem.spreadselectors")

SERVICE = "Service"
REPLICATION_CONTROLLER = "ReplicationController"
REPLICA_SET = "ReplicaSet"
STATEFUL_SET = "StatefulSet"
KINDS = (SERVICE, REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET)

# the controllers DefaultSelector knows, by (group, version) and kind of the controller reference
_CONTROLLERS = {
    (("", "v1"), "ReplicationController"): REPLICATION_CONTROLLER,
    (("apps", "v1"), "ReplicaSet"): REPLICA_SET,
    (("apps", "v1"), "StatefulSet"): STATEFUL_SET,
}
# the kinds whose selector is a label map; the others' is a metav1.LabelSelector
_MAP_SELECTORS = frozenset({SERVICE, REPLICATION_CONTROLLER})

_NO_SELECTORS: dict[str, Any] = {}


class Malformed(ValueError):
    """An object whose selector upstream could not decode or use; the message says what is wrong."""


class SpreadSelectors:
    """The Services', ReplicationControllers', ReplicaSets' and StatefulSets' selectors, per namespace."""

    def __init__(self) -> None:
        self.version = 0
        # kind -> namespace -> name -> selector; only objects whose selector can select a pod are kept
        self._selectors: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}

    # ------------------------------------------------------------------ informer handlers

    def on_add(self, kind: str, obj: Mapping[str, Any]) -> None:
        self._set(kind, obj)

    def on_update(self, kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self._set(kind, new)

    def on_delete(self, kind: str, obj: Mapping[str, Any]) -> None:
        try:
            namespace, name = _key(obj)
        except Malformed as exc:
            log.warning("ignoring the delete of a malformed %s: %s", kind, exc)
            return
        self._drop(kind, namespace, name)

    def _set(self, kind: str, obj: Mapping[str, Any]) -> None:
        by_namespace = self._selectors[kind]  # an unknown kind is a bug in the caller: KeyError
        try:
            namespace, name = _key(obj)
        except Malformed as exc:
            log.warning("ignoring a malformed %s: %s", kind, exc)
            return
        try:
            selector = _selector(kind, obj)
        except Malformed as exc:
            log.warning("%s %s/%s selects no pod for topology spreading: %s", kind, namespace, name, exc)
            selector = None
        if selector is None:
            self._drop(kind, namespace, name)
            return
        names = by_namespace.setdefault(namespace, {})
        if names.get(name) != selector:
            names[name] = selector
            self.version += 1

    def _drop(self, kind: str, namespace: str, name: str) -> None:
        names = self._selectors[kind].get(namespace)
        if names is None or name not in names:
            return
        del names[name]
        if not names:
            del self._selectors[kind][namespace]
        self.version += 1

    # ------------------------------------------------------------------ the answer

    def default_selector(self, namespace: str, labels: Mapping[str, str],
                         owners: Iterable[OwnerRef]) -> tuple[dict[str, str], list[dict[str, Any]]] | None:
        """What selects a pod with these ``labels`` and ``owners`` in ``namespace``, as DefaultSelector.

        Returns ``(match_labels, label_selectors)``: the merged selector maps
        of the Services that select the pod and of its controlling
        ReplicationController, and the ``spec.selector`` of its controlling
        ReplicaSet or StatefulSet (a list of at most one metav1.LabelSelector,
        as the API has it; valid, with at least one requirement; shared, so
        not to be mutated). A pod is selected by all of them together.
        ``None`` when nothing selects the pod: upstream then gives it no
        default constraints.
        """
        merged: dict[str, str] = {}
        for selector in self._selectors[SERVICE].get(namespace, _NO_SELECTORS).values():
            # since these all select the pod they agree on every key, and merging is safe
            if all(labels.get(k) == v for k, v in selector.items()):
                merged.update(selector)
        label_selectors: list[dict[str, Any]] = []
        kind, name = _controller(owners)
        if kind is not None:
            selector = self._selectors[kind].get(namespace, _NO_SELECTORS).get(name)
            if selector is not None:
                if kind in _MAP_SELECTORS:
                    merged.update(selector)  # labels.Merge: the controller's value wins
                else:
                    label_selectors.append(selector)
        if not merged and not label_selectors:
            return None
        return merged, label_selectors


def _controller(owners: Iterable[OwnerRef]) -> tuple[str | None, str]:
    """The kind DefaultSelector knows of the pod's controller (GetControllerOfNoCopy), and its name."""
    for owner in owners:
        if owner.controller:
            group_version = _parse_group_version(owner.api_version)
            if group_version is None:
                return None, ""
            return _CONTROLLERS.get((group_version, owner.kind)), owner.name
    return None, ""


def _parse_group_version(api_version: str) -> tuple[str, str] | None:
    """schema.ParseGroupVersion: "v1" -> ("", "v1"), "apps/v1" -> ("apps", "v1"); None for an error."""
    if api_version in ("", "/"):
        return "", ""
    slashes = api_version.count("/")
    if slashes == 0:
        return "", api_version
    if slashes == 1:
        group, _, version = api_version.partition("/")
        return group, version
    return None


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        raise Malformed("no metadata")
    namespace, name = meta.get("namespace"), meta.get("name")
    if not isinstance(namespace, str) or not namespace or not isinstance(name, str) or not name:
        raise Malformed(f"no namespace and name: {namespace!r}/{name!r}")
    return namespace, name


def _selector(kind: str, obj: Mapping[str, Any]) -> Any:
    """The object's selector as stored here, or None when it can select no pod."""
    spec = obj.get("spec")
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise Malformed(f"spec is a {type(spec).__name__}")
    raw = spec.get("selector")
    if raw is None:
        return None  # a nil Service selector selects nothing; a nil LabelSelector, labels.Nothing()
    if kind in _MAP_SELECTORS:
        labels = _label_map(raw, "spec.selector")
        return labels or None  # an empty map adds nothing to the merge
    if not isinstance(raw, Mapping):
        raise Malformed(f"spec.selector is a {type(raw).__name__}")
    return dict(raw) if _requirements(raw) else None


def _label_map(raw: Any, path: str) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise Malformed(f"{path} is not a map of strings")
    return dict(raw)


# metav1.LabelSelectorAsSelector: its operators, and the value count each takes
_OPERATORS = {"In": True, "NotIn": True, "Exists": False, "DoesNotExist": False}
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _requirements(raw: Mapping[str, Any]) -> int:
    """How many requirements LabelSelectorAsSelector makes of ``raw``; Malformed where it fails."""
    match_labels = _label_map(raw.get("matchLabels") or {}, "spec.selector.matchLabels")
    for key, value in match_labels.items():
        _check_key(key)
        _check_value(value)
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise Malformed("spec.selector.matchExpressions is not a list")
    for e in expressions:
        if not isinstance(e, Mapping):
            raise Malformed("a matchExpression is not an object")
        key, operator, values = e.get("key", ""), e.get("operator"), e.get("values") or []
        if not isinstance(key, str) or not isinstance(values, list) or \
                not all(isinstance(v, str) for v in values):
            raise Malformed(f"matchExpression {e!r} has fields of the wrong type")
        if operator not in _OPERATORS:
            raise Malformed(f"{operator!r} is not a valid label selector operator")
        _check_key(key)
        if _OPERATORS[operator] != bool(values):
            raise Malformed(f"operator {operator} of {key!r} takes {'values' if _OPERATORS[operator] else 'none'}")
        for value in values:
            _check_value(value)
    return len(match_labels) + len(expressions)


def _check_key(key: str) -> None:
    """validation.IsQualifiedName, as labels.NewRequirement checks a key."""
    prefix, slash, name = key.rpartition("/")
    ok = (0 < len(name) <= 63 and _NAME.fullmatch(name) is not None
          and (not slash or (0 < len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix) is not None)))
    if not ok:
        raise Malformed(f"{key!r} is not a valid label key")


def _check_value(value: str) -> None:
    """validation.IsValidLabelValue."""
    if value and (len(value) > 63 or _NAME.fullmatch(value) is None):
        raise Malformed(f"{value!r} is not a valid label value")
