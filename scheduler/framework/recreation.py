"""The durable record of evicted bare pods to create again, kept on their PodGroup.

GangReadiness (plugins/gang_readiness.py) evicts a gang that did not become
Ready in time; a bare pod (no controller owner) has nobody to create it
again, and tandem never loses a pod. This module is that record: its format
(:func:`recreation`, the annotation's codec), its keeper and only writer
(:class:`Records`), and the probes that say whether the old pod is gone
(:func:`seen`, :func:`look`, :func:`grace_left`); the eviction round
(scheduler/framework/gangeviction.py) runs the recreations. It lives in the framework because a plugin may import only the
framework and the model (tests/unit/test_boundaries.py), and it is no parsed
API record, which the model holds.

Before the plugin deletes bare pods, it writes what recreating them needs
onto their PodGroup, in the annotation
``scheduling.tandem.dev/pending-recreations``: compact JSON mapping each
pod's name to its old uid and the pod to create (:func:`recreation`: its
spec and user metadata, without what the API server refuses on create or
sets itself, and without its node). Then it deletes them, waits for each
old pod to be gone (the name is free only then) for as long as its grace
period says (its deletionTimestamp) plus a margin, creates it again and
removes its entry. An old pod still there after that is reported (a Warning
event on the PodGroup; a finalizer or a node that is down can keep it) and
still waited for. A new tandem process, or the other replica after a
failover, finds the entries when it first sees the PodGroup and completes
them. Each step may be repeated: a create answered 409 AlreadyExists is
done when the pod of that name has another uid, and waits when it is the
old one, still terminating; an entry whose old pod is not being deleted
(the process stopped between the write and the delete) is dropped, since
that pod was never evicted. A create the API server refuses as invalid is
given up with a Warning FailedCreate event on the PodGroup naming the pod
and the reason; other errors are retried. An object's annotations may hold
256 KiB in all: the entries are gzipped when plain JSON would not fit, and
bare pods whose entries still do not fit are not evicted (the PodsReady
message and the log say how many); they keep their nodes until a later
round. Deleting the PodGroup drops its entries: pods under way in this
process are still recreated, a restart does not find them.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import gzip
import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from scheduler.model import Pod, PodGroup, parse_time, pod_group_path

if TYPE_CHECKING:
    from scheduler.framework.handle import Client, Handle

log = logging.getLogger("tandem.plugins.gang_readiness")   # the plugin's: one logger for one feature

# on the PodGroup: the bare pods evicted and not yet created again (see the module docstring)
RECREATE_ANNOTATION = "scheduling.tandem.dev/pending-recreations"
ANNOTATIONS_LIMIT = 256 * 1024  # bytes of all of an object's annotation keys and values (TotalAnnotationSizeLimitB)
DEFAULT_GRACE_SECONDS = 30      # the API's default terminationGracePeriodSeconds


# spec fields a pod is created again without. What kube-apiserver refuses on create: ephemeralContainers
# ("Forbidden: cannot be set on create"); priority, preemptionPolicy and overhead once the PriorityClass or
# RuntimeClass they came from changed (403 from the Priority and RuntimeClass admission plugins, which fill
# them in from the class names, which stay). What pins the old placement: nodeName.
_SPEC_NOT_CREATED = ("nodeName", "ephemeralContainers", "priority", "preemptionPolicy", "overhead")


def recreation(raw: dict[str, Any]) -> dict[str, Any]:
    """The body that creates a bare pod again: its user metadata and spec, without node, status or identity.

    Kept: name, namespace, labels, annotations, finalizers, and the owners that are not its controller (a
    bare pod has none; the others, e.g. an object it is garbage-collected with, still own the new pod).
    Left out: what the API server sets (uid, resourceVersion, which it refuses on create, generation,
    timestamps, managedFields), status, and the spec fields in ``_SPEC_NOT_CREATED``.
    """
    meta = raw.get("metadata") or {}
    keep = {k: copy.deepcopy(meta[k]) for k in ("name", "namespace", "labels", "annotations", "finalizers")
            if meta.get(k)}
    owners = [copy.deepcopy(o) for o in meta.get("ownerReferences") or ()
              if isinstance(o, dict) and o.get("controller") is not True]
    if owners:
        keep["ownerReferences"] = owners
    spec = {k: copy.deepcopy(v) for k, v in (raw.get("spec") or {}).items() if k not in _SPEC_NOT_CREATED}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": keep, "spec": spec}


def annotation_room(pg: PodGroup) -> int:
    """Bytes left for RECREATE_ANNOTATION's value beside the group's other annotations."""
    used = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in pg.annotations.items()
               if k != RECREATE_ANNOTATION)
    return ANNOTATIONS_LIMIT - used - len(RECREATE_ANNOTATION)


def encode_records(records: dict[str, Any], room: int | None) -> str | None:
    """Compact JSON if it fits in ``room`` bytes (None: any size), else gzip+base64 if that fits, else None."""
    text = json.dumps(records, separators=(",", ":")).encode()
    if room is None or len(text) <= room:
        return text.decode()
    packed = base64.b64encode(gzip.compress(text, mtime=0))   # gang members' pods are near-identical
    return packed.decode() if len(packed) <= room else None


def decode_records(key: str, value: Any) -> dict[str, dict[str, Any]]:
    """The entries in a RECREATE_ANNOTATION value ({} when absent); malformed ones are logged and skipped."""
    if not isinstance(value, str) or not value:
        return {}
    try:
        text = value.encode() if value.lstrip().startswith("{") else gzip.decompress(base64.b64decode(value))
        data = json.loads(text)
    except (ValueError, OSError, EOFError, binascii.Error) as exc:
        log.error("PodGroup %s: %s is not readable (%s); its pods cannot be created again", key,
                  RECREATE_ANNOTATION, exc)
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name, entry in (data.items() if isinstance(data, dict) else ()):
        if isinstance(entry, dict) and isinstance(entry.get("uid"), str) and isinstance(entry.get("pod"), dict):
            out[name] = entry
        else:
            log.error("PodGroup %s: %s[%s] is malformed; skipped", key, RECREATE_ANNOTATION, name)
    return out


def seen(pods: Mapping[str, Pod], member_uids: Iterable[str], name: str, uid: str) -> tuple[str, dict[str, Any] | None]:
    """The old pod as the informer has it (``pods``; ``member_uids``: its gang's): "gone", "replaced" (a member of that name with another uid),
    "terminating", or "ask" (not being deleted as far as the informer knows: the API server knows better)."""
    p = pods.get(uid)
    if p is not None:
        return ("terminating", p.raw) if p.deleting else ("ask", None)
    for other in member_uids:
        q = pods.get(other)
        if q is not None and q.name == name:
            return "replaced", q.raw
    return "gone", None


async def look(client: Client, path: str, name: str, uid: str) -> tuple[str, dict[str, Any] | None]:
    """The pod called ``name`` as the API server has it: "gone", "replaced" (another uid), "terminating",
    "alive" (the old pod, not being deleted) or "unknown" (the read failed)."""
    try:
        obj = await client.get(f"{path}/{name}")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001
        if getattr(exc, "status", None) == 404:
            return "gone", None
        log.debug("cannot read pod %s: %s", name, exc)
        return "unknown", None
    meta = obj.get("metadata") or {}
    if str(meta.get("uid", "")) != uid:
        return "replaced", obj
    return ("terminating" if meta.get("deletionTimestamp") else "alive"), obj


def grace_left(raw: dict[str, Any] | None, now: float) -> float:
    """Seconds until a terminating pod should be gone, at wall time ``now``: to its deletionTimestamp (the end
    of its grace period), else its grace period."""
    meta = (raw or {}).get("metadata") or {}
    end = parse_time(meta.get("deletionTimestamp"))
    if end:
        return max(end - now, 0.0)
    grace = meta.get("deletionGracePeriodSeconds")
    if not isinstance(grace, (int, float)):
        grace = ((raw or {}).get("spec") or {}).get("terminationGracePeriodSeconds")
    return float(grace) if isinstance(grace, (int, float)) and grace >= 0 else DEFAULT_GRACE_SECONDS


class Records:
    """The bare pods to create again, per PodGroup, as this process knows them, and their writer: the
    PodGroup's RECREATE_ANNOTATION is written from here only, one write at a time per group."""

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.entries: dict[str, dict[str, dict[str, Any]]] = {}   # key -> pod name -> {"uid", "pod"}
        self.read: set[str] = set()                               # groups whose annotation was read
        self.written: dict[str, str | None] = {}                  # key -> the annotation's value, last written
        self.locks: dict[str, asyncio.Lock] = {}                  # one writer of the annotation per group

    def clear(self) -> None:
        """Forget what was read and written (shutdown: the next leader reads the annotations afresh)."""
        self.entries.clear()
        self.read.clear()
        self.written.clear()

    def deleted(self, key: str) -> None:
        """The PodGroup is gone: its annotation went with it."""
        self.read.discard(key)
        self.written.pop(key, None)
        self._unlock(key)

    def _unlock(self, key: str) -> None:
        """Drop the group's lock once its PodGroup is gone and no write holds it (a save under way drops it)."""
        lock = self.locks.get(key)
        if lock is not None and not lock.locked() and key not in self.read and not self.entries.get(key):
            del self.locks[key]

    def load(self, key: str, pg: PodGroup) -> None:
        """Read the group's pending recreations the first time it is seen (later: what this process knows)."""
        if key not in self.read:
            self.read.add(key)
            value = pg.annotations.get(RECREATE_ANNOTATION)
            found = decode_records(key, value)
            if found:
                self.entries[key] = {**found, **self.entries.get(key, {})}
            self.written[key] = value if isinstance(value, str) else None

    def plan(self, key: str, pg: PodGroup, bare: list[Pod]) -> list[Pod]:
        """Add entries for ``bare`` to the group's records (memory only); the pods whose entries fit, in order."""
        records = dict(self.entries.get(key) or {})
        entries = [(p, {"uid": p.uid, "pod": recreation(p.raw)}) for p in bare]
        room = annotation_room(pg)
        while entries and encode_records({**records, **{p.name: e for p, e in entries}}, room) is None:
            entries.pop()   # the last ones stay where they are: not evicted, not lost
        if entries:
            records.update((p.name, e) for p, e in entries)
            self.entries[key] = records
        return [p for p, _ in entries]

    async def save(self, key: str) -> bool:
        """Write the group's records as this process knows them onto the PodGroup (one writer per group)."""
        lock = self.locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                return await self._write(key)
        finally:
            self._unlock(key)   # a deleted group's lock goes with its last write

    async def _write(self, key: str) -> bool:
        records = self.entries.get(key) or {}
        value: str | None = None
        if records:
            pg = self.handle.gangs.group(key)
            value = encode_records(records, annotation_room(pg) if pg is not None else None) \
                or encode_records(records, None)   # smaller than before, or the API says no
        if key in self.written and self.written[key] == value:
            return True
        try:
            await self.handle.client.patch(pod_group_path(key),
                                           {"metadata": {"annotations": {RECREATE_ANNOTATION: value}}})
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - already retried by the client
            if getattr(exc, "status", None) == 404:
                log.info("PodGroup %s is gone: its pending recreations went with it", key)
            else:
                log.warning("PodGroup %s: cannot write its pending recreations: %s", key, exc)
            return False
        if key in self.read:   # (a group deleted meanwhile has no annotation to remember)
            self.written[key] = value
        if not records:
            self.entries.pop(key, None)
        return True

    async def drop(self, key: str, name: str) -> None:
        """Pod ``name`` is created again (or need not be): its entry goes, here and on the PodGroup."""
        records = self.entries.get(key)
        if records is not None:
            records.pop(name, None)
        if not await self.save(key) and not records:
            self.entries.pop(key, None)   # the PodGroup is gone: nothing left to keep
