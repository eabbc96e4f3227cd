"""Server-side printing: ``meta.k8s.io/v1`` Table responses, as kube-apiserver renders them.

kubectl does not format objects itself. ``kubectl get`` sends

    Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json

and prints the columns and cells the server chose. A server that ignores the
``as=Table`` clause and answers with a plain list makes kubectl fall back to
NAME and AGE, which is what the stand-in did before this module.

What is mirrored here, and from where upstream:

* content negotiation (apiserver ``endpoints/handlers/negotiation``): a
  Table only when an Accept clause asks ``as=Table`` in group ``meta.k8s.io``
  at version ``v1`` or ``v1beta1``; the Table then carries that apiVersion;
* the ``includeObject`` option (``Metadata`` by default: each row carries a
  PartialObjectMetadata, ``Object`` the full object, ``None`` null) and its
  400 for other values (``handlers/response.go`` ``asTable``);
* the columns, types, priorities and cell values of the built-in printers
  (``pkg/printers/internalversion/printers.go``), rendered with
  ``Wide: true`` as the apiserver's TableConvertor does; ``-o wide`` is
  kubectl showing the priority-1 columns it otherwise hides;
* custom resources: ``additionalPrinterColumns`` read from the CRD manifests
  in ``manifests/crds`` (apiextensions ``tableconvertor``), ``Age`` alone
  when a version declares none;
* anything else: Name and "Created At" (apiserver ``rest.DefaultTableConvertor``);
* ages as ``duration.HumanDuration`` writes them (``5s``, ``3m2s``, ``5h``, ``3d``).

The HTTP layer decides *whether* a Table is wanted (:func:`requested`) and
keeps its byte-joining fast path for everything else; this module only ever
sees requests that asked for a Table, so it may parse every object. It must
never change what a plain JSON client receives.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson
import yaml

from bench.simcluster import errors
from bench.simcluster.defaults import QuantityError
# Quantity.String(), the canonical form defaulting already prints in its messages
from bench.simcluster.defaults import quantity_string as quantity_string
from bench.simcluster.resources import ResourceType
from bench.simcluster.selectors import SelectorError, label_selector_from_object

log = logging.getLogger("simcluster.tables")

META_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
DEFAULT_TABLE_VERSION = f"{META_GROUP}/v1"
INCLUDE_OBJECT = ("Metadata", "Object", "None")

CRD_DIR = Path(__file__).resolve().parents[2] / "manifests" / "crds"


# ---------------------------------------------------------------------------- negotiation

def _accept_clauses(accept: str) -> list[tuple[str, dict[str, str]]]:
    """The clauses of an Accept header, best first: (media type, parameters).

    Ordered by q, highest first, keeping the header's order among equals (goautoneg);
    clauses with q=0 are refused by the client and dropped.
    """
    clauses: list[tuple[float, int, str, dict[str, str]]] = []
    for i, part in enumerate(accept.split(",")):
        fields = [f.strip() for f in part.split(";")]
        mime = fields[0].lower()
        if not mime:
            continue
        params: dict[str, str] = {}
        for f in fields[1:]:
            k, sep, v = f.partition("=")
            if sep:
                params[k.strip().lower()] = v.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        if q > 0:
            clauses.append((-q, i, mime, params))
    clauses.sort(key=lambda c: (c[0], c[1]))
    return [(mime, params) for _, _, mime, params in clauses]


def negotiate(accept: str) -> str | None:
    """The Table apiVersion the Accept header asks for, or None for the plain object.

    The first acceptable clause wins, as in kube-apiserver. A clause asking for a
    conversion the stand-in cannot do (another ``as=``, another group or version)
    is skipped like upstream skips an unacceptable one; when nothing asks for a
    Table the answer is plain JSON, which is all the stand-in ever serves.
    """
    if "as=" not in accept:
        return None  # the common case, decided without parsing
    for mime, params in _accept_clauses(accept):
        if mime not in ("application/json", "application/*", "*/*"):
            continue
        target = params.get("as")
        if target is None:
            return None
        if (target == "Table" and params.get("g") == META_GROUP
                and params.get("v") in TABLE_VERSIONS):
            return f"{META_GROUP}/{params['v']}"
    return None


def wants_table(accept_header: str) -> bool:
    """True when the Accept header asks for a meta.k8s.io v1 or v1beta1 Table."""
    return negotiate(accept_header) is not None


def include_object_option(query: Any) -> str:
    """``includeObject`` of TableOptions, validated as ``ValidateTableOptions`` does (400 otherwise)."""
    value = query.get("includeObject", "") or ""
    if value and value not in INCLUDE_OBJECT:
        cause = errors.invalid_value("includeObject", value, "must be 'Metadata', 'Object', 'None', or empty")
        raise errors.bad_request(f"Unable to convert to Table as requested: {cause.text()}")
    return value


@dataclass(frozen=True, slots=True)
class TableRequest:
    """A request that asked for a Table: which apiVersion, and what each row carries."""

    api_version: str
    include_object: str

    def render(self, rt: ResourceType, entries: Iterable[Any], now: float, *, rv: str | None = None,
               cont: str = "", remaining: int | None = None) -> dict[str, Any]:
        """A Table of stored entries; ``rv=None`` for a single object, whose own resourceVersion it carries."""
        objs = entry_objects(rt, entries)
        if rv is None:
            rv = _str(_get(objs[0], "metadata", "resourceVersion")) if objs else ""
        return render_table(rt, objs, rv, self.include_object, now, cont=cont, remaining=remaining,
                            api_version=self.api_version)

    def watch_writer(self, resp: Any, rt: ResourceType, clock: Callable[[], float]) -> TableWatchWriter:
        return TableWatchWriter(resp, self, rt, clock)


def requested(accept: str, query: Any) -> TableRequest | None:
    """What the request asks for: None for plain JSON (the fast path), else a :class:`TableRequest`."""
    version = negotiate(accept)
    if version is None:
        return None
    return TableRequest(version, include_object_option(query))


# ---------------------------------------------------------------------------- time

def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: ~2-3 significant figures ("45s", "3m2s", "5h", "3d4h", "2y10d")."""
    s = math.trunc(seconds)  # Go's int(d.Seconds()) truncates toward zero
    if s < -1:
        return "<invalid>"  # more than a second of clock skew
    if s < 0:
        return "0s"
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


_ZERO_TIME = -62135596800.0  # 0001-01-01T00:00:00Z, Go's zero time.Time


@lru_cache(maxsize=4096)
def _parse_time_str(value: str) -> float | None:
    try:
        t = datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None
    return None if t <= _ZERO_TIME else t


def parse_time(value: Any) -> float | None:
    """An RFC 3339 timestamp (metav1.Time or MicroTime) as epoch seconds; None for null or zero."""
    if not isinstance(value, str) or not value:
        return None
    return _parse_time_str(value)


def since(value: Any, now: float) -> str:
    """``translateTimestampSince``: the age of a timestamp, ``<unknown>`` when unset."""
    t = parse_time(value)
    return "<unknown>" if t is None else human_duration(now - t)


# ---------------------------------------------------------------------------- columns

@dataclass(frozen=True, slots=True)
class Column:
    """A ``TableColumnDefinition``. Priority 1 columns are the ones kubectl shows only with ``-o wide``."""

    name: str
    type: str = "string"
    format: str = ""
    description: str = ""
    priority: int = 0

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


Cells = Callable[[dict[str, Any], float], list[Any]]


@dataclass(frozen=True, slots=True)
class Printer:
    """Columns and the function that fills one row's cells (the ``TableHandler`` pair upstream)."""

    columns: tuple[Column, ...]
    cells: Cells
    conditions: Callable[[dict[str, Any]], list[dict[str, str]] | None] | None = None

    def definitions(self) -> list[dict[str, Any]]:
        return [c.definition() for c in self.columns]


# Descriptions are the API documentation upstream takes them from (ObjectMeta's
# and the printed fields' SwaggerDoc), first sentence where upstream's is long.
_NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, although some "
             "resources may allow a client to request the generation of an appropriate name automatically. "
             "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
             "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
_CREATED_DOC = ("CreationTimestamp is a timestamp representing the server time when this object was created. "
                "It is not guaranteed to be set in happens-before order across separate operations. Clients "
                "may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the "
                "system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/"
                "sig-architecture/api-conventions.md#metadata")
NAME = Column("Name", "string", "name", _NAME_DOC)
AGE = Column("Age", "string", "", _CREATED_DOC)


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _name(obj: dict[str, Any]) -> str:
    return _str(_get(obj, "metadata", "name"))


def _age(obj: dict[str, Any], now: float) -> str:
    return since(_get(obj, "metadata", "creationTimestamp"), now)


def _deleting(obj: dict[str, Any]) -> bool:
    return _get(obj, "metadata", "deletionTimestamp") is not None


# ---------------------------------------------------------------------------- Pod

POD_COLUMNS = (
    NAME,
    Column("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
    Column("Status", description="The aggregate status of the containers in this pod."),
    Column("Restarts", description="The number of times the containers in this pod have been restarted and "
                                   "when the last container in this pod has restarted."),
    AGE,
    Column("IP", priority=1, description="IP address allocated to the pod. Routable at least within the "
                                         "cluster. Empty if not yet allocated."),
    Column("Node", priority=1, description="NodeName is a request to schedule this pod onto a specific node."),
    Column("Nominated Node", priority=1,
           description="nominatedNodeName is set only when this pod preempts other pods on the node, but it "
                       "cannot be scheduled right away as preemption victims receive their graceful "
                       "termination periods."),
    Column("Readiness Gates", priority=1,
           description="If specified, all readiness gates will be evaluated for pod readiness."),
)

_POD_TERMINAL = ("Succeeded", "Failed")
# pkg/util/node: the reason the node lifecycle controller gives pods on an unreachable node
_NODE_LOST = "NodeLost"


def _condition_true(conditions: Any, ctype: str) -> bool:
    return any(isinstance(c, dict) and c.get("type") == ctype and c.get("status") == "True"
               for c in (conditions or ()))


def _restartable(container: dict[str, Any] | None) -> bool:
    # a sidecar: an init container with restartPolicy Always (podutil.IsRestartableInitContainer)
    return container is not None and container.get("restartPolicy") == "Always"


def _finished_at(cs: dict[str, Any]) -> float | None:
    return parse_time(_get(cs, "lastState", "terminated", "finishedAt"))


def _later(a: float | None, b: float | None) -> float | None:
    if b is None:
        return a
    return b if a is None or b > a else a


def pod_status(pod: dict[str, Any]) -> tuple[str, int, int, int, float | None]:
    """printPod's STATUS reasoning: (status, ready containers, total containers, restarts, last restart).

    Phase (or status.reason), then SchedulingGated, then the first init container
    that has not finished, then the containers' waiting/terminated reasons (the
    first container wins, as upstream walks them backwards), then Terminating.
    """
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    phase = _str(status.get("phase"))
    reason = _str(status.get("reason")) or phase
    for c in conditions:
        if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    containers = spec.get("containers") or []
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or [] if isinstance(c, dict)}
    total = len(containers) + sum(1 for c in init_specs.values() if _restartable(c))
    ready = 0
    restarts = sidecar_restarts = 0
    last_restart: float | None = None
    last_sidecar_restart: float | None = None

    initializing = False
    n_init = len(spec.get("initContainers") or [])
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        state = cs.get("state") or {}
        restarts += _int(cs.get("restartCount"))
        last_restart = _later(last_restart, _finished_at(cs))
        sidecar = _restartable(init_specs.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += _int(cs.get("restartCount"))
            last_sidecar_restart = _later(last_sidecar_restart, _finished_at(cs))
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            elif _int(terminated.get("signal")):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{n_init}"
        initializing = True
        break

    if not initializing or _condition_true(conditions, "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            restarts += _int(cs.get("restartCount"))
            last_restart = _later(last_restart, _finished_at(cs))
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                if _int(terminated.get("signal")):
                    reason = f"Signal:{terminated['signal']}"
                else:
                    reason = f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        # a pod whose other containers completed is still Running while one runs
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"

    if _deleting(pod) and status.get("reason") == _NODE_LOST:
        reason = "Unknown"
    elif _deleting(pod) and phase not in _POD_TERMINAL:
        reason = "Terminating"
    return reason, ready, total, restarts, last_restart


def _pod_cells(pod: dict[str, Any], now: float) -> list[Any]:
    reason, ready, total, restarts, last_restart = pod_status(pod)
    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration(now - last_restart)} ago)"
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    ips = status.get("podIPs") or []
    # the internal type's PodIPs, which conversion fills from podIP when absent
    ip = _str(ips[0].get("ip")) if ips and isinstance(ips[0], dict) else _str(status.get("podIP"))
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        by_type = {c.get("type"): c for c in reversed(status.get("conditions") or []) if isinstance(c, dict)}
        met = sum(1 for g in gates if (by_type.get(g.get("conditionType")) or {}).get("status") == "True")
        gates_cell = f"{met}/{len(gates)}"
    return [_name(pod), f"{ready}/{total}", reason, restarts_cell, _age(pod, now),
            ip or "<none>", _str(spec.get("nodeName")) or "<none>",
            _str(status.get("nominatedNodeName")) or "<none>", gates_cell]


def _pod_conditions(pod: dict[str, Any]) -> list[dict[str, str]] | None:
    phase = _get(pod, "status", "phase")
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded",
                 "message": "The pod has completed successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return None


# ---------------------------------------------------------------------------- Node

NODE_COLUMNS = (
    NAME,
    Column("Status", description="The status of the node"),
    Column("Roles", description="The roles of the node"),
    AGE,
    Column("Version", description="Kubelet Version reported by the node."),
    Column("Internal-IP", priority=1, description="List of addresses reachable to the node."),
    Column("External-IP", priority=1, description="List of addresses reachable to the node."),
    Column("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release "
                                               "(e.g. Debian GNU/Linux 7 (wheezy))."),
    Column("Kernel-Version", priority=1, description="Kernel Version reported by the node from 'uname -r' "
                                                     "(e.g. 3.16.0-0.bpo.4-amd64)."),
    Column("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node "
                                                        "through runtime remote API (e.g. containerd://1.4.2)."),
)

_ROLE_PREFIX = "node-role.kubernetes.io/"
_ROLE_LABEL = "kubernetes.io/role"


def node_status(node: dict[str, Any]) -> str:
    """Ready / NotReady from the Ready condition, Unknown without one, plus SchedulingDisabled when cordoned."""
    words: list[str] = []
    ready = None
    for c in _get(node, "status", "conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            ready = c  # the last one wins, as upstream's condition map
    if ready is not None:
        words.append("Ready" if ready.get("status") == "True" else "NotReady")
    else:
        words.append("Unknown")
    if _get(node, "spec", "unschedulable"):
        words.append("SchedulingDisabled")
    return ",".join(words)


def node_roles(node: dict[str, Any]) -> str:
    roles: set[str] = set()
    for k, v in (_get(node, "metadata", "labels") or {}).items():
        if k.startswith(_ROLE_PREFIX) and len(k) > len(_ROLE_PREFIX):
            roles.add(k[len(_ROLE_PREFIX):])
        elif k == _ROLE_LABEL and v:
            roles.add(v)
    return ",".join(sorted(roles)) or "<none>"


def _node_address(node: dict[str, Any], kind: str) -> str:
    for a in _get(node, "status", "addresses") or []:
        if isinstance(a, dict) and a.get("type") == kind:
            return _str(a.get("address"))
    return "<none>"


def _node_cells(node: dict[str, Any], now: float) -> list[Any]:
    info = _get(node, "status", "nodeInfo") or {}
    return [_name(node), node_status(node), node_roles(node), _age(node, now),
            _str(info.get("kubeletVersion")),
            _node_address(node, "InternalIP"), _node_address(node, "ExternalIP"),
            _str(info.get("osImage")) or "<unknown>", _str(info.get("kernelVersion")) or "<unknown>",
            _str(info.get("containerRuntimeVersion")) or "<unknown>"]


# ---------------------------------------------------------------------------- Namespace, Event

NAMESPACE_COLUMNS = (NAME, Column("Status", description="The status of the namespace"), AGE)


def _namespace_cells(ns: dict[str, Any], now: float) -> list[Any]:
    return [_name(ns), _str(_get(ns, "status", "phase")), _age(ns, now)]


EVENT_COLUMNS = (
    Column("Last Seen", description="The time at which the most recent occurrence of this event was recorded."),
    Column("Type", description="Type of this event (Normal, Warning), new types could be added in the future"),
    Column("Reason", description="This should be a short, machine understandable string that gives the "
                                 "reason for the transition into the object's current status."),
    Column("Object", description="The object that this event is about."),
    Column("Subobject", priority=1, description="If referring to a piece of an object instead of an entire "
                                                "object, this string should contain a valid JSON/Go-field "
                                                "access statement, such as desiredState.manifest.containers[2]."),
    Column("Source", priority=1, description="The component reporting this event. Should be a short machine "
                                             "understandable string."),
    Column("Message", description="A human-readable description of the status of this operation."),
    Column("First Seen", priority=1, description="The time at which the event was first recorded. (Time of "
                                                 "server receipt is in TypeMeta.)"),
    Column("Count", priority=1, description="The number of times this event has occurred."),
    Column("Name", priority=1, format="name", description=_NAME_DOC),
)


def _event_cells(ev: dict[str, Any], now: float) -> list[Any]:
    # cells come from the core/v1 shape; an events.k8s.io/v1 object is converted first
    first = since(ev.get("firstTimestamp"), now) if parse_time(ev.get("firstTimestamp")) is not None \
        else since(ev.get("eventTime"), now)
    last = since(ev.get("lastTimestamp"), now) if parse_time(ev.get("lastTimestamp")) is not None else first
    count = _int(ev.get("count"))
    series = ev.get("series")
    if isinstance(series, dict):
        last = since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1  # singleton events carry no count in the new API
    involved = ev.get("involvedObject") or {}
    kind = _str(involved.get("kind")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = ev.get("source") or {}
    component = _str(source.get("component")) or _str(ev.get("reportingComponent"))
    instance = _str(source.get("host")) or _str(ev.get("reportingInstance"))
    return [last, _str(ev.get("type")), _str(ev.get("reason")), target, _str(involved.get("fieldPath")),
            f"{component}, {instance}" if instance else component, _str(ev.get("message")).strip(),
            first, count, _name(ev)]


# ---------------------------------------------------------------------------- storage

_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
_DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                              "storageclass.beta.kubernetes.io/is-default-class")
_ACCESS_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
                 ("ReadWriteOncePod", "RWOP"))


def access_modes(modes: Any) -> str:
    """``helper.GetAccessModesAsString``: short names in a fixed order, duplicates once."""
    have = set(modes or ())
    return ",".join(short for mode, short in _ACCESS_MODES if mode in have)


def _quantity(value: Any) -> str:
    """``Quantity.String()``; a missing quantity is the zero Quantity, "0"."""
    if value is None:
        return "0"
    try:
        return quantity_string(value)
    except QuantityError:
        return str(value)


def _volume_class(obj: dict[str, Any]) -> str:
    ann = _get(obj, "metadata", "annotations") or {}
    if _STORAGE_CLASS_ANNOTATION in ann:
        return _str(ann[_STORAGE_CLASS_ANNOTATION])
    return _str(_get(obj, "spec", "storageClassName"))


PV_COLUMNS = (
    NAME,
    Column("Capacity", description="capacity is the description of the persistent volume's resources and capacity."),
    Column("Access Modes", description="accessModes contains all ways the volume can be mounted."),
    Column("Reclaim Policy", description="persistentVolumeReclaimPolicy defines what happens to a persistent "
                                         "volume when released from its claim."),
    Column("Status", description="phase indicates if a volume is available, bound to a claim, or released by a claim."),
    Column("Claim", description="claimRef is part of a bi-directional binding between PersistentVolume and "
                                "PersistentVolumeClaim."),
    Column("StorageClass", description="StorageClass of the pv"),
    Column("VolumeAttributesClass", description="VolumeAttributesClass of the pv"),
    Column("Reason", description="reason is a brief CamelCase string that describes any failure and is meant "
                                 "for machine parsing and tidy display in the CLI."),
    AGE,
    Column("VolumeMode", priority=1, description="volumeMode defines if a volume is intended to be used with "
                                                 "a formatted filesystem or to remain in raw block state."),
)


def _pv_cells(pv: dict[str, Any], now: float) -> list[Any]:
    spec = pv.get("spec") or {}
    ref = spec.get("claimRef")
    claim = f"{_str(ref.get('namespace'))}/{_str(ref.get('name'))}" if isinstance(ref, dict) else ""
    phase = "Terminating" if _deleting(pv) else _str(_get(pv, "status", "phase"))
    return [_name(pv), _quantity((spec.get("capacity") or {}).get("storage")), access_modes(spec.get("accessModes")),
            _str(spec.get("persistentVolumeReclaimPolicy")), phase, claim, _volume_class(pv),
            _str(spec.get("volumeAttributesClassName")) or "<unset>", _str(_get(pv, "status", "reason")),
            _age(pv, now), _str(spec.get("volumeMode")) or "<unset>"]


PVC_COLUMNS = (
    NAME,
    Column("Status", description="phase represents the current phase of PersistentVolumeClaim."),
    Column("Volume", description="volumeName is the binding reference to the PersistentVolume backing this claim."),
    Column("Capacity", description="capacity represents the actual resources of the underlying volume."),
    Column("Access Modes", description="accessModes contains the actual access modes the volume backing the "
                                       "PVC has."),
    Column("StorageClass", description="StorageClass of the pvc"),
    Column("VolumeAttributesClass", description="VolumeAttributesClass of the pvc"),
    AGE,
    Column("VolumeMode", priority=1, description="volumeMode defines what type of volume is required by the claim."),
)


def _pvc_cells(pvc: dict[str, Any], now: float) -> list[Any]:
    spec = pvc.get("spec") or {}
    status = pvc.get("status") or {}
    phase = "Terminating" if _deleting(pvc) else _str(status.get("phase"))
    capacity = modes = ""
    if spec.get("volumeName"):  # only a bound claim shows what it got
        modes = access_modes(status.get("accessModes"))
        capacity = _quantity((status.get("capacity") or {}).get("storage"))
    return [_name(pvc), phase, _str(spec.get("volumeName")), capacity, modes, _volume_class(pvc),
            _str(spec.get("volumeAttributesClassName")) or "<unset>", _age(pvc, now),
            _str(spec.get("volumeMode")) or "<unset>"]


STORAGE_CLASS_COLUMNS = (
    NAME,
    Column("Provisioner", description="provisioner indicates the type of the provisioner."),
    Column("ReclaimPolicy", description="reclaimPolicy controls the reclaimPolicy for dynamically provisioned "
                                        "PersistentVolumes of this storage class."),
    Column("VolumeBindingMode", description="volumeBindingMode indicates how PersistentVolumeClaims should be "
                                            "provisioned and bound."),
    Column("AllowVolumeExpansion", description="allowVolumeExpansion shows whether the storage class allow "
                                               "volume expand."),
    AGE,
)


def _storage_class_cells(sc: dict[str, Any], now: float) -> list[Any]:
    ann = _get(sc, "metadata", "annotations") or {}
    name = _name(sc)
    if any(ann.get(a) == "true" for a in _DEFAULT_CLASS_ANNOTATIONS):
        name += " (default)"
    return [name, _str(sc.get("provisioner")), _str(sc.get("reclaimPolicy")) or "Delete",
            _str(sc.get("volumeBindingMode")) or "Immediate", sc.get("allowVolumeExpansion") is True,
            _age(sc, now)]


CSINODE_COLUMNS = (NAME, Column("Drivers", "integer", description="Drivers indicates the number of CSI drivers "
                                                                   "registered on the node"), AGE)


def _csinode_cells(csinode: dict[str, Any], now: float) -> list[Any]:
    drivers = _get(csinode, "spec", "drivers")
    return [_name(csinode), len(drivers) if isinstance(drivers, list) else 0, _age(csinode, now)]


CSIDRIVER_COLUMNS = (
    NAME,
    Column("AttachRequired", "boolean", description="attachRequired indicates this CSI volume driver requires an "
                                                    "attach operation."),
    Column("PodInfoOnMount", "boolean", description="podInfoOnMount indicates this CSI volume driver requires "
                                                    "additional pod information during mount operations."),
    Column("StorageCapacity", "boolean", description="storageCapacity indicates that the CSI volume driver wants "
                                                     "pod scheduling to consider the storage capacity."),
    Column("TokenRequests", description="tokenRequests indicates the CSI driver needs pods' service account tokens "
                                        "it is mounting volume for to do necessary authentication."),
    Column("RequiresRepublish", "boolean", description="requiresRepublish indicates the CSI driver wants "
                                                       "`NodePublishVolume` being periodically called."),
    Column("Modes", description="volumeLifecycleModes defines what kind of volumes this CSI volume driver supports."),
    AGE,
)


def _csidriver_cells(driver: dict[str, Any], now: float) -> list[Any]:
    spec = _get(driver, "spec") or {}
    audiences = [_str(t.get("audience")) for t in spec.get("tokenRequests") or () if isinstance(t, dict)]
    modes = [_str(m) for m in spec.get("volumeLifecycleModes") or ()]
    return [_name(driver), spec.get("attachRequired") is not False, spec.get("podInfoOnMount") is True,
            spec.get("storageCapacity") is True, ",".join(audiences) if audiences else "<unset>",
            spec.get("requiresRepublish") is True, ",".join(modes) if modes else "<none>", _age(driver, now)]


VOLUME_ATTACHMENT_COLUMNS = (
    NAME,
    Column("Attacher", format="name", description="attacher indicates the name of the volume driver that MUST "
                                                  "handle this request."),
    Column("PV", description="persistentVolumeName represents the name of the persistent volume to attach."),
    Column("Node", description="nodeName represents the node that the volume should be attached to."),
    Column("Attached", "boolean", description="attached indicates the volume is successfully attached."),
    AGE,
)


def _volume_attachment_cells(va: dict[str, Any], now: float) -> list[Any]:
    return [_name(va), _str(_get(va, "spec", "attacher")), _str(_get(va, "spec", "source", "persistentVolumeName")),
            _str(_get(va, "spec", "nodeName")), _get(va, "status", "attached") is True, _age(va, now)]


# ---------------------------------------------------------------------------- policy, scheduling, coordination

PDB_COLUMNS = (
    NAME,
    Column("Min Available", description="The minimum number of pods that must be available."),
    Column("Max Unavailable", description="The maximum number of pods that may be unavailable."),
    Column("Allowed Disruptions", "integer", description="Calculated number of pods that may be disrupted at "
                                                         "this time."),
    AGE,
)


def _int_or_string(value: Any) -> str:
    if value is None:
        return "N/A"
    return str(value) if not isinstance(value, bool) else "N/A"


def _pdb_cells(pdb: dict[str, Any], now: float) -> list[Any]:
    spec = pdb.get("spec") or {}
    return [_name(pdb), _int_or_string(spec.get("minAvailable")), _int_or_string(spec.get("maxUnavailable")),
            _int(_get(pdb, "status", "disruptionsAllowed")), _age(pdb, now)]


PRIORITY_CLASS_COLUMNS = (
    NAME,
    Column("Value", "integer", description="value represents the integer value of this priority class."),
    Column("Global-Default", "boolean", description="globalDefault specifies whether this PriorityClass should "
                                                    "be considered as the default priority for pods that do not "
                                                    "have any priority class."),
    AGE,
    Column("PreemptionPolicy", description="preemptionPolicy is the Policy for preempting pods with lower "
                                           "priority."),
)


def _priority_class_cells(pc: dict[str, Any], now: float) -> list[Any]:
    return [_name(pc), _int(pc.get("value")), pc.get("globalDefault") is True, _age(pc, now),
            _str(pc.get("preemptionPolicy"))]


LEASE_COLUMNS = (NAME, Column("Holder", description="holderIdentity contains the identity of the holder of a "
                                                    "current lease."), AGE)


def _lease_cells(lease: dict[str, Any], now: float) -> list[Any]:
    return [_name(lease), _str(_get(lease, "spec", "holderIdentity")), _age(lease, now)]


# ---------------------------------------------------------------------------- services and controllers

def format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: ``k=v`` sorted by key and comma-joined, ``<none>`` when empty."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={_str(v)}" for k, v in sorted(labels.items()))


def format_label_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: the selector's string form, ``<none>`` when it selects all or nothing."""
    try:
        text = str(label_selector_from_object(selector if isinstance(selector, dict) else None))
    except (SelectorError, AttributeError, TypeError):
        return "<error>"
    return text or "<none>"


def _containers(obj: dict[str, Any]) -> list[str]:
    """``layoutContainerCells`` of the pod template: container names, then images, comma-joined."""
    containers = _get(obj, "spec", "template", "spec", "containers")
    items = [c for c in containers if isinstance(c, dict)] if isinstance(containers, list) else []
    return [",".join(_str(c.get("name")) for c in items), ",".join(_str(c.get("image")) for c in items)]


_CONTAINERS_DOC = "Names of each container in the template."
_IMAGES_DOC = "Images referenced by each container in the template."

def _replica_columns(ready: str, selector: str) -> tuple[Column, ...]:
    """The columns ReplicationControllers and ReplicaSets share; only two descriptions differ."""
    return (
        NAME,
        Column("Desired", "integer", description="Replicas is the number of desired replicas."),
        Column("Current", "integer", description="Replicas is the most recently observed number of replicas."),
        Column("Ready", "integer", description=f"The number of ready replicas for this {ready}."),
        AGE,
        Column("Containers", priority=1, description=_CONTAINERS_DOC),
        Column("Images", priority=1, description=_IMAGES_DOC),
        Column("Selector", priority=1, description=f"Selector is a label query over pods that should match the "
                                                   f"{selector} count."),
    )


def _replica_cells(obj: dict[str, Any], now: float, selector: str) -> list[Any]:
    return [_name(obj), _int(_get(obj, "spec", "replicas")), _int(_get(obj, "status", "replicas")),
            _int(_get(obj, "status", "readyReplicas")), _age(obj, now), *_containers(obj), selector]


REPLICATION_CONTROLLER_COLUMNS = _replica_columns("replication controller", "Replicas")
REPLICA_SET_COLUMNS = _replica_columns("replica set", "replica")


def _replication_controller_cells(rc: dict[str, Any], now: float) -> list[Any]:
    return _replica_cells(rc, now, format_labels(_get(rc, "spec", "selector")))  # a map


def _replica_set_cells(rs: dict[str, Any], now: float) -> list[Any]:
    return _replica_cells(rs, now, format_label_selector(_get(rs, "spec", "selector")))  # a LabelSelector


STATEFUL_SET_COLUMNS = (
    NAME,
    Column("Ready", description="Number of the pod with ready state"),
    AGE,
    Column("Containers", priority=1, description=_CONTAINERS_DOC),
    Column("Images", priority=1, description=_IMAGES_DOC),
)


def _stateful_set_cells(ss: dict[str, Any], now: float) -> list[Any]:
    ready, desired = _int(_get(ss, "status", "readyReplicas")), _int(_get(ss, "spec", "replicas"))
    return [_name(ss), f"{ready}/{desired}", _age(ss, now), *_containers(ss)]


SERVICE_COLUMNS = (
    NAME,
    Column("Type", description="type determines how the Service is exposed."),
    Column("Cluster-IP", description="clusterIP is the IP address of the service and is usually assigned "
                                     "randomly."),
    Column("External-IP", description="externalIPs is a list of IP addresses for which nodes in the cluster will "
                                      "also accept traffic for this service."),
    Column("Port(s)", description="The list of ports that are exposed by this service."),
    AGE,
    Column("Selector", priority=1, description="Route service traffic to pods with label keys and values "
                                               "matching this selector."),
)


def service_external_ip(svc: dict[str, Any]) -> str:
    """``getServiceExternalIP`` as the server renders it (wide: load-balancer addresses are not clipped)."""
    ips = _get(svc, "spec", "externalIPs")
    external = [_str(ip) for ip in ips] if isinstance(ips, list) else []
    kind = _get(svc, "spec", "type")
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        ingress = _get(svc, "status", "loadBalancer", "ingress")
        seen = {_str(i.get("ip")) or _str(i.get("hostname")) for i in ingress or [] if isinstance(i, dict)}
        lb = sorted(seen - {""})
        if external:
            return ",".join(lb + external)
        return ",".join(lb) or "<pending>"
    if kind == "ExternalName":
        return _str(_get(svc, "spec", "externalName"))
    return "<unknown>"


def service_ports(svc: dict[str, Any]) -> str:
    """``makePortString``: ``port/protocol``, or ``port:nodePort/protocol``; ``<none>`` without ports."""
    ports = _get(svc, "spec", "ports")
    pieces = []
    for p in ports if isinstance(ports, list) else []:
        if not isinstance(p, dict):
            continue
        node_port = _int(p.get("nodePort"))
        middle = f"{_int(p.get('port'))}:{node_port}" if node_port > 0 else str(_int(p.get("port")))
        pieces.append(f"{middle}/{_str(p.get('protocol'))}")
    return ",".join(pieces) or "<none>"


def _service_cells(svc: dict[str, Any], now: float) -> list[Any]:
    cluster_ips = _get(svc, "spec", "clusterIPs")
    cluster_ip = _str(cluster_ips[0]) if isinstance(cluster_ips, list) and cluster_ips else "<none>"
    return [_name(svc), _str(_get(svc, "spec", "type")), cluster_ip, service_external_ip(svc), service_ports(svc),
            _age(svc, now), format_labels(_get(svc, "spec", "selector"))]


# ---------------------------------------------------------------------------- the default convertor

DEFAULT_COLUMNS = (NAME, Column("Created At", "date", description=_CREATED_DOC))


def _default_cells(obj: dict[str, Any], now: float) -> list[Any]:
    # rest.DefaultTableConvertor: the timestamp itself, UTC RFC 3339, not an age
    t = parse_time(_get(obj, "metadata", "creationTimestamp"))
    stamp = "0001-01-01T00:00:00Z" if t is None else \
        datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [_name(obj), stamp]


POD_GROUP_COLUMNS = (
    NAME,
    Column("Policy", description="SchedulingPolicy defines the scheduling policy for this instance of the "
                                 "PodGroup. Controllers are expected to fill this field by copying it from a "
                                 "PodGroupTemplate. This field is immutable."),
    Column("Workload", description="Name of the referenced Workload object"),
    Column("Status", description="Status of the PodGroup"),
    AGE,
)


def _pod_group_cells(pg: dict[str, Any], now: float) -> list[Any]:
    """scheduling.k8s.io/v1alpha2 PodGroup, as kube-apiserver 1.36.2 prints it (read off the real server):
    Status is a DisruptionTarget condition's reason, else Scheduled or Unschedulable as PodGroupScheduled
    is True or not, else Pending."""
    spec = pg.get("spec") if isinstance(pg.get("spec"), dict) else {}
    policy = spec.get("schedulingPolicy") if isinstance(spec.get("schedulingPolicy"), dict) else {}
    kind = "Gang" if policy.get("gang") is not None else "Basic" if policy.get("basic") is not None else ""
    conditions = [c for c in _get(pg, "status", "conditions") or [] if isinstance(c, dict)]
    by_type = {c.get("type"): c for c in conditions}
    if "DisruptionTarget" in by_type:
        status = _str(by_type["DisruptionTarget"].get("reason"))
    elif "PodGroupScheduled" in by_type:
        status = "Scheduled" if by_type["PodGroupScheduled"].get("status") == "True" else "Unschedulable"
    else:
        status = "Pending"
    workload = _str(_get(pg, "spec", "podGroupTemplateRef", "workload", "workloadName")) or "<none>"
    return [_name(pg), kind, workload, status, _age(pg, now)]


# resource.k8s.io/v1, as kube-apiserver 1.36.2 prints it (read off the real server)
NAME_AGE_COLUMNS = (NAME, AGE)


def _name_age_cells(obj: dict[str, Any], now: float) -> list[Any]:
    return [_name(obj), _age(obj, now)]


RESOURCE_CLAIM_COLUMNS = (NAME, Column("State", description="A summary of the current state (allocated, pending, "
                                                               "reserved, etc.)."), AGE)


def resource_claim_state(claim: dict[str, Any]) -> str:
    """``deleted`` when being deleted, then ``allocated`` (and ``reserved`` when reserved) or ``pending`` when
    not deleted."""
    states = ["deleted"] if _deleting(claim) else []
    if _get(claim, "status", "allocation") is None:
        if not states:
            states.append("pending")
    else:
        states.append("allocated")
        if _get(claim, "status", "reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _resource_claim_cells(claim: dict[str, Any], now: float) -> list[Any]:
    return [_name(claim), resource_claim_state(claim), _age(claim, now)]


RESOURCE_SLICE_COLUMNS = (
    NAME,
    Column("Node", description="NodeName identifies the node which provides the resources in this pool. A field "
                               "selector can be used to list only ResourceSlice objects belonging to a certain "
                               "node.\n\nThis field can be used to limit access from nodes to ResourceSlices with "
                               "the same node name. It also indicates to autoscalers that adding new nodes of the "
                               "same type as some old node might also make new resources available.\n\nExactly one "
                               "of NodeName, NodeSelector, AllNodes, and PerDeviceNodeSelection must be set. This "
                               "field is immutable."),
    Column("Driver", description="Driver identifies the DRA driver providing the capacity information. A field "
                                 "selector can be used to list only ResourceSlice objects with a certain driver "
                                 "name.\n\nMust be a DNS subdomain and should end with a DNS domain owned by the "
                                 "vendor of the driver. It should use only lower case characters. This field is "
                                 "immutable."),
    Column("Pool", description="Name is used to identify the pool. For node-local devices, this is often the node "
                               "name, but this is not required.\n\nIt must not be longer than 253 characters and "
                               "must consist of one or more DNS sub-domains separated by slashes. This field is "
                               "immutable."),
    AGE,
)


def _resource_slice_cells(rs: dict[str, Any], now: float) -> list[Any]:
    return [_name(rs), _str(_get(rs, "spec", "nodeName")), _str(_get(rs, "spec", "driver")),
            _str(_get(rs, "spec", "pool", "name")), _age(rs, now)]


DEFAULT_PRINTER = Printer(DEFAULT_COLUMNS, _default_cells)

# keyed by the storage resource, so a view (events.k8s.io/v1 events) prints like its storage
BUILTIN: dict[tuple[str, str], Printer] = {
    ("", "pods"): Printer(POD_COLUMNS, _pod_cells, _pod_conditions),
    ("", "nodes"): Printer(NODE_COLUMNS, _node_cells),
    ("", "namespaces"): Printer(NAMESPACE_COLUMNS, _namespace_cells),
    ("", "events"): Printer(EVENT_COLUMNS, _event_cells),
    ("", "persistentvolumes"): Printer(PV_COLUMNS, _pv_cells),
    ("", "persistentvolumeclaims"): Printer(PVC_COLUMNS, _pvc_cells),
    ("storage.k8s.io", "storageclasses"): Printer(STORAGE_CLASS_COLUMNS, _storage_class_cells),
    ("storage.k8s.io", "csinodes"): Printer(CSINODE_COLUMNS, _csinode_cells),
    ("storage.k8s.io", "csidrivers"): Printer(CSIDRIVER_COLUMNS, _csidriver_cells),
    ("storage.k8s.io", "volumeattachments"): Printer(VOLUME_ATTACHMENT_COLUMNS, _volume_attachment_cells),
    ("policy", "poddisruptionbudgets"): Printer(PDB_COLUMNS, _pdb_cells),
    ("scheduling.k8s.io", "priorityclasses"): Printer(PRIORITY_CLASS_COLUMNS, _priority_class_cells),
    ("coordination.k8s.io", "leases"): Printer(LEASE_COLUMNS, _lease_cells),
    ("", "services"): Printer(SERVICE_COLUMNS, _service_cells),
    ("", "replicationcontrollers"): Printer(REPLICATION_CONTROLLER_COLUMNS, _replication_controller_cells),
    ("apps", "replicasets"): Printer(REPLICA_SET_COLUMNS, _replica_set_cells),
    ("apps", "statefulsets"): Printer(STATEFUL_SET_COLUMNS, _stateful_set_cells),
    ("scheduling.k8s.io", "podgroups"): Printer(POD_GROUP_COLUMNS, _pod_group_cells),
    ("resource.k8s.io", "deviceclasses"): Printer(NAME_AGE_COLUMNS, _name_age_cells),
    ("resource.k8s.io", "resourceclaims"): Printer(RESOURCE_CLAIM_COLUMNS, _resource_claim_cells),
    ("resource.k8s.io", "resourceclaimtemplates"): Printer(NAME_AGE_COLUMNS, _name_age_cells),
    ("resource.k8s.io", "resourceslices"): Printer(RESOURCE_SLICE_COLUMNS, _resource_slice_cells),
}


# ---------------------------------------------------------------------------- custom resources

_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]")


def _compile_path(json_path: str) -> list[str | int] | None:
    """A CRD column's simple JSONPath (``.status.phase``, ``.spec.items[0].name``); None if not that simple."""
    steps: list[str | int] = []
    pos = 0
    while pos < len(json_path):
        m = _PATH_TOKEN.match(json_path, pos)
        if m is None:
            return None
        steps.append(int(m.group(2)) if m.group(2) is not None else (m.group(1) or m.group(3) or ""))
        pos = m.end()
    return steps


_MISSING = object()


def _lookup(obj: Any, steps: list[str | int]) -> Any:
    for step in steps:
        if isinstance(step, int):
            if not isinstance(obj, list) or step >= len(obj):
                return _MISSING
            obj = obj[step]
        else:
            if not isinstance(obj, dict) or step not in obj:
                return _MISSING  # AllowMissingKeys: no result, not an error
            obj = obj[step]
    return obj


def _go_text(value: Any) -> str:
    """How client-go's jsonpath prints one result: maps and lists as JSON, scalars as fmt.Print does."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        # %v of a float64: no ".0", exponent only from 1e21 on
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    return orjson.dumps(value).decode() if isinstance(value, (dict, list)) else str(value)


def _crd_cell(col_type: str, value: Any, now: float) -> Any:
    """``cellForJSONValue``: the JSON value as the column's type, null when it is not one."""
    if value is None or value is _MISSING:
        return None
    if col_type == "string":
        return _go_text(value)
    if col_type == "integer":
        if isinstance(value, bool):
            return None
        return int(value) if isinstance(value, (int, float)) else None
    if col_type == "number":
        if isinstance(value, bool):
            return None
        return float(value) if isinstance(value, (int, float)) else None
    if col_type == "boolean":
        return value if isinstance(value, bool) else None
    if col_type == "date":
        if not isinstance(value, str):
            return None
        try:
            t = datetime.fromisoformat(value).timestamp()
        except ValueError:
            return "<invalid>"
        return "<unknown>" if t <= _ZERO_TIME else human_duration(now - t)
    return None


def crd_printer(columns: list[dict[str, Any]]) -> Printer:
    """The apiextensions TableConvertor for one CRD version's ``additionalPrinterColumns``."""
    if not columns:
        # serveDefaultColumnsIfEmpty
        columns = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
                    "description": _CREATED_DOC}]
    defs = [NAME]
    paths: list[tuple[str, list[str | int] | None]] = []
    for col in columns:
        json_path = str(col.get("jsonPath", ""))
        defs.append(Column(str(col["name"]), str(col.get("type", "string")), str(col.get("format", "") or ""),
                           str(col.get("description") or
                               f"Custom resource definition column (in JSONPath format): {json_path}"),
                           int(col.get("priority", 0) or 0)))
        paths.append((str(col.get("type", "string")), _compile_path(json_path)))

    def cells(obj: dict[str, Any], now: float) -> list[Any]:
        row: list[Any] = [_name(obj)]
        for col_type, steps in paths:
            row.append(None if steps is None else _crd_cell(col_type, _lookup(obj, steps), now))
        return row

    return Printer(tuple(defs), cells)


@lru_cache(maxsize=1)
def crd_printers(crd_dir: Path = CRD_DIR) -> dict[tuple[str, str, str], Printer]:
    """Printers for every CRD version in ``manifests/crds``, keyed by (group, plural, version)."""
    out: dict[tuple[str, str, str], Printer] = {}
    for path in sorted(crd_dir.glob("*.yaml")) if crd_dir.is_dir() else ():
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
        except (OSError, yaml.YAMLError) as exc:
            log.warning("cannot read CRD manifest %s (its tables fall back to Name and Created At): %s", path, exc)
            continue
        for crd in docs:
            if crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd.get("spec") or {}
            group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
            for version in spec.get("versions") or []:
                out[(group, plural, version.get("name", ""))] = crd_printer(
                    version.get("additionalPrinterColumns") or [])
    return out


def printer_for(rt: ResourceType) -> Printer:
    builtin = BUILTIN.get(rt.key)
    if builtin is not None:
        return builtin
    crd = crd_printers().get((rt.group, rt.plural, rt.version))
    return crd if crd is not None else DEFAULT_PRINTER


# ---------------------------------------------------------------------------- rendering

def _row_object(obj: dict[str, Any], include_object: str, api_version: str) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    # meta.AsPartialObjectMetadata: all of the object's metadata, nothing else
    meta = dict(obj.get("metadata") or {})
    meta.setdefault("creationTimestamp", None)
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": meta}


def render_table(rt: ResourceType, objs: list[dict[str, Any]], resource_version: str, include_object: str,
                 now: float, *, cont: str = "", remaining: int | None = None, headers: bool = True,
                 api_version: str = DEFAULT_TABLE_VERSION) -> dict[str, Any]:
    """The ``meta.k8s.io`` Table kube-apiserver answers for ``objs`` (each in ``rt``'s version).

    ``now`` (epoch seconds) is the clock ages are measured against. ``headers=False``
    leaves columnDefinitions null, as upstream does for every watch event after the first.
    """
    if include_object not in ("", *INCLUDE_OBJECT):
        raise errors.bad_request(f"unrecognized includeObject value: {orjson.dumps(include_object).decode()}")
    printer = printer_for(rt)
    rows: list[dict[str, Any]] = []
    for obj in objs:
        source = rt.from_view(obj) if rt.from_view is not None else obj
        row: dict[str, Any] = {"cells": printer.cells(source, now)}
        if printer.conditions is not None:
            conditions = printer.conditions(source)
            if conditions:
                row["conditions"] = conditions
        row["object"] = _row_object(obj, include_object, api_version)
        rows.append(row)
    meta: dict[str, Any] = {}
    if resource_version:
        meta["resourceVersion"] = resource_version
    if cont:
        meta["continue"] = cont
        if remaining is not None:
            meta["remainingItemCount"] = remaining
    return {"kind": "Table", "apiVersion": api_version, "metadata": meta,
            "columnDefinitions": printer.definitions() if headers else None, "rows": rows}


class TableWatchWriter:
    """Stands in for the watch response: turns each event's object into a one-row Table.

    The watch loop writes whole JSON lines (``{"type":..,"object":..}``); this
    re-encodes each object as upstream's watch encoder does for a Table
    request: column definitions in the first event only, ERROR events (a
    Status) untouched, bookmarks converted like any other object.
    """

    __slots__ = ("_resp", "_table", "_rt", "_clock", "_headers", "_pending")

    def __init__(self, resp: Any, table: TableRequest, rt: ResourceType, clock: Callable[[], float]) -> None:
        self._resp = resp
        self._table = table
        self._rt = rt
        self._clock = clock
        self._headers = True
        self._pending = b""

    def _convert(self, line: bytes, now: float) -> bytes:
        event = orjson.loads(line)
        obj = event.get("object")
        if event.get("type") == "ERROR" or not isinstance(obj, dict) or obj.get("kind") == "Status":
            return line + b"\n"
        rv = _str(_get(obj, "metadata", "resourceVersion"))
        event["object"] = render_table(self._rt, [obj], rv, self._table.include_object, now,
                                       headers=self._headers, api_version=self._table.api_version)
        self._headers = False
        return orjson.dumps(event) + b"\n"

    async def write(self, data: bytes) -> None:
        *lines, self._pending = (self._pending + data).split(b"\n")
        now = self._clock()
        out = b"".join(self._convert(line, now) for line in lines if line.strip())
        if out:
            await self._resp.write(out)

    async def write_eof(self, data: bytes = b"") -> None:
        if data:
            await self.write(data)
        if self._pending.strip():
            await self._resp.write(self._convert(self._pending, self._clock()))
            self._pending = b""
        await self._resp.write_eof()


def entry_objects(rt: ResourceType, entries: Iterable[Any]) -> list[dict[str, Any]]:
    """Stored entries as the objects a client of ``rt`` sees (a view converts its storage's objects)."""
    if rt.to_view is None:
        return [e.obj() for e in entries]
    return [rt.to_view(e.obj()) for e in entries]
