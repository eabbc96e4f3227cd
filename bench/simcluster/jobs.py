"""A minimal Job controller and the podgroup-protection controller, as kube-controller-manager 1.36 runs them.

Kubernetes 1.36's Job controller, with the WorkloadWithJob gate, gives a
qualifying Job a ``scheduling.k8s.io/v1alpha2`` Workload and PodGroup and
puts its pods in that group: this is how plain Jobs get gang-scheduled by
upstream's native gang API. The stand-in does the same when the native gang
API is enabled (``SimCluster(native_gangs=True)``); without it Jobs get
their pods and no groups, as on a cluster without the gate.

Observed on kube-apiserver + kube-controller-manager 1.36.2 (job-controller,
podgroup-protection-controller; gates GenericWorkload, GangScheduling,
WorkloadWithJob), and mirrored here:

* **Which Jobs.** Only ``completionMode: Indexed`` Jobs with
  ``parallelism > 1`` and ``completions == parallelism`` whose pod template
  has no ``spec.schedulingGroup``. A suspended qualifying Job gets its
  Workload and PodGroup at once (and no pods). Any other Job gets pods only.
  Groups are created only for a Job that has not started (no pods, no
  ``status.startTime``).
* **Workload** ``<job>-<hash>``: the hash is fnv-32a of ``(types.UID)<job uid>``
  (hashutil.DeepHashObject's spew rendering of the UID), its decimal digits
  mapped through rand.SafeEncodeString's alphabet; the Job's name is cut to
  fit 253 characters. ``ownerReferences``: the Job, as controller with
  blockOwnerDeletion. ``spec.controllerRef``: ``{apiGroup: batch, kind: Job,
  name}``. One template ``<job>-pgt-0`` with ``gang.minCount = parallelism``.
  Event on the Job: ``WorkloadCreated`` "Created Workload <w> for Job <job>".
* **PodGroup** ``<workload>-<template>-<hash>``, the hash the same encoding of
  fnv-32a over the workload name followed by the template name (both cut to
  share 253 characters when too long). ``ownerReferences``: the Job as
  controller, then the Workload (no controller, no blockOwnerDeletion).
  ``spec.podGroupTemplateRef.workload`` names both; the scheduling policy is
  the template's; the server adds ``disruptionMode: Pod``, ``priority`` and
  the ``scheduling.k8s.io/podgroup-protection`` finalizer. No event.
* **Order.** Workload, then PodGroup, then the pods: a pod never exists
  before its group.
* **Pods** ``<job>-<index>-<random>`` (generateName ``<job>-<index>-``;
  ``<job>-`` for a NonIndexed Job). Labels: the template's (which include the
  four selector labels the server added to it) and
  ``batch.kubernetes.io/job-completion-index``; annotations: the template's and
  the same completion index. Finalizer ``batch.kubernetes.io/job-tracking``;
  one ownerReference, the Job (controller, blockOwnerDeletion). An Indexed
  pod gets ``hostname: <job>-<index>`` and a ``JOB_COMPLETION_INDEX`` env var
  (from that label) in each container. ``spec.schedulingGroup.podGroupName``
  names the PodGroup; pods get **no** ownerReference to the PodGroup (issue
  22 says they do; the 1.36.2 controller does not). Event per pod:
  ``SuccessfulCreate`` "Created pod: <name>". ``min(parallelism,
  completions)`` pods are created at once.
* **Job status** after the pods: ``active``, ``ready: 0``, ``terminating: 0``,
  ``startTime``, ``uncountedTerminatedPods: {}``.
* **podgroup-protection**: a PodGroup being deleted keeps its finalizer while
  any pod of its namespace that has not finished (phase neither Succeeded
  nor Failed) names it in ``spec.schedulingGroup``; once none does, the
  finalizer goes and the delete completes.

Left out (not needed to schedule a Job's pods): completion and failure
tracking (``succeeded``/``failed``, conditions, backoff, replacement pods,
``activeDeadlineSeconds``, success and failure policies), scaling a running
Job, un-suspending after start, the managed-by hand-off, Jobs owned by
another controller, garbage collection of a deleted Job's pods and groups
(no garbage collector runs in the stand-in). The ``job-tracking`` finalizer
is removed from a pod once it is terminal or being deleted, as upstream
removes it after counting the pod, so deletes complete.

Like the other controllers here it reads the store through cursors and
writes through it (see :mod:`bench.simcluster.looping`).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from bench.simcluster import errors
from bench.simcluster.looping import StoreLoop, record_event
from bench.simcluster.resources import lookup
from bench.simcluster.store import DELETED, MATCH_ALL, Store
from bench.simcluster.workloads import POD_GROUP_FINALIZER

log = logging.getLogger("simcluster.jobs")

JOBS = lookup("batch", "v1", "jobs")
PODS = lookup("", "v1", "pods")
WORKLOADS = lookup("scheduling.k8s.io", "v1alpha2", "workloads")
POD_GROUPS = lookup("scheduling.k8s.io", "v1alpha2", "podgroups")

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
CONTROLLER_NAME = "job-controller"
DNS1123_SUBDOMAIN_MAX = 253
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"   # rand.SafeEncodeString's
_TERMINAL = ("Succeeded", "Failed")


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


# ---------------------------------------------------------------------------- names

def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def safe_encode(s: str) -> str:
    """rand.SafeEncodeString: each byte mapped into an alphabet without vowels or look-alikes."""
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in s)


def workload_name(job_name: str, job_uid: str) -> str:
    """computeWorkloadName: ``<job>-<hash of the Job's UID>``."""
    digest = safe_encode(str(fnv32a(f"(types.UID){job_uid}".encode())))
    return f"{job_name[:DNS1123_SUBDOMAIN_MAX - len(digest) - 1]}-{digest}"


def template_name(job_name: str) -> str:
    return f"{job_name}-pgt-0"


def pod_group_name(workload: str, template: str) -> str:
    """computePodGroupName: ``<workload>-<template>-<hash of both>``, the two cut to share what is left."""
    digest = safe_encode(str(fnv32a((workload + template).encode())))
    room = DNS1123_SUBDOMAIN_MAX - len(digest) - 2
    if len(workload) + len(template) > room:
        half = room // 2
        if len(workload) <= half:
            template = template[:room - len(workload)]
        elif len(template) <= half:
            workload = workload[:room - len(template)]
        else:
            workload, template = workload[:room - half], template[:half]
    return f"{workload}-{template}-{digest}"


def qualifies(job: dict[str, Any]) -> bool:
    """Whether the 1.36 Job controller gives this Job a Workload and a gang PodGroup."""
    spec = _dict(job.get("spec"))
    parallelism, completions = spec.get("parallelism"), spec.get("completions")
    return (spec.get("completionMode") == "Indexed" and isinstance(parallelism, int) and parallelism > 1
            and completions == parallelism
            and _dict(_dict(spec.get("template")).get("spec")).get("schedulingGroup") is None)


def controller_ref(job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


# ---------------------------------------------------------------------------- the Job controller

class JobController(StoreLoop):
    """Creates a new Job's pods (and, with ``native_gangs``, its Workload and PodGroup)."""

    def __init__(self, store: Store, native_gangs: bool, tick: float = 0.02) -> None:
        super().__init__("simcluster-job-controller", tick, log)
        self.store = store
        self.native_gangs = native_gangs
        self._dirty: set[tuple[str, str]] = set()

    def _resync(self) -> tuple[Any, Any]:
        rv = str(self.store.rv)
        cursors = (self.store.watcher(JOBS, "", MATCH_ALL, rv, send_initial=False),
                   self.store.watcher(PODS, "", MATCH_ALL, rv, send_initial=False))
        self._dirty.update(self.store.table(JOBS).objects)
        for entry in list(self.store.table(PODS).objects.values()):
            if b'"batch.kubernetes.io/job-tracking"' in entry.raw:
                self._release(entry.obj())
        return cursors

    def _step(self, cursors: tuple[Any, Any]) -> None:
        jobs, pods = cursors
        while batch := jobs.poll_events():
            self._dirty.update(ev.new.key for ev in batch if ev.type != DELETED)
        while batch := pods.poll_events():
            for ev in batch:
                # only pods this controller marked are parsed: the rest pass on a bytes search
                if ev.type != DELETED and b'"batch.kubernetes.io/job-tracking"' in ev.new.raw:
                    self._release(ev.new.obj())
        while self._dirty:
            key = self._dirty.pop()
            job = self.store.get_obj(JOBS, *key)
            if job is not None:
                self.sync(job)

    def _release(self, pod: dict[str, Any]) -> None:
        """Drop the job-tracking finalizer of a pod that is done or being deleted."""
        meta = pod["metadata"]
        finalizers = meta.get("finalizers") or []
        if TRACKING_FINALIZER not in finalizers:
            return
        if not meta.get("deletionTimestamp") and _dict(pod.get("status")).get("phase") not in _TERMINAL:
            return
        meta["finalizers"] = [f for f in finalizers if f != TRACKING_FINALIZER]
        try:
            self.store.update(PODS, meta["namespace"], meta["name"], pod)
        except errors.APIError as exc:   # changed meanwhile: the next event brings it back
            log.debug("releasing pod %s/%s: %s", meta["namespace"], meta["name"], exc)

    def sync(self, job: dict[str, Any]) -> None:
        meta, spec, status = job["metadata"], _dict(job.get("spec")), _dict(job.get("status"))
        if meta.get("deletionTimestamp") or status.get("startTime"):
            return   # started: its pods exist (completion tracking is not simulated)
        ns = meta["namespace"]
        group = None
        if self.native_gangs and qualifies(job):
            group = self._ensure_groups(job)
        if spec.get("suspend") is True:
            return
        parallelism = spec.get("parallelism") or 0
        completions = spec.get("completions")
        count = parallelism if completions is None else min(parallelism, completions)
        indexed = spec.get("completionMode") == "Indexed"
        created = 0
        for i in range(count):
            pod = self._pod(job, i if indexed else None, group)
            try:
                entry = self.store.create(PODS, ns, pod)
            except errors.APIError as exc:
                log.warning("job %s/%s: creating a pod failed: %s", ns, meta["name"], exc.message)
                self._event(job, "Warning", "FailedCreate", f"Error creating: {exc.message}")
                continue
            created += 1
            self._event(job, "Normal", "SuccessfulCreate", f"Created pod: {entry.key[1]}")
        job["status"] = {**status, "active": created, "ready": 0, "terminating": 0,
                         "startTime": self.store.now(), "uncountedTerminatedPods": {}}
        try:
            self.store.update(JOBS, ns, meta["name"], job, subresource="status")
        except errors.APIError as exc:
            log.warning("job %s/%s: status update failed: %s", ns, meta["name"], exc.message)

    def _ensure_groups(self, job: dict[str, Any]) -> str | None:
        """The Job's Workload and PodGroup, created when missing; returns the PodGroup's name."""
        meta = job["metadata"]
        ns, name = meta["namespace"], meta["name"]
        wl_name, tpl = workload_name(name, meta["uid"]), template_name(name)
        parallelism = job["spec"]["parallelism"]
        workload = self.store.get_obj(WORKLOADS, ns, wl_name)
        if workload is None:
            body = {"apiVersion": WORKLOADS.api_version, "kind": "Workload",
                    "metadata": {"name": wl_name, "namespace": ns, "ownerReferences": [controller_ref(job)]},
                    "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
                             "podGroupTemplates": [{"name": tpl,
                                                    "schedulingPolicy": {"gang": {"minCount": parallelism}}}]}}
            try:
                workload = self.store.create(WORKLOADS, ns, body).obj()
            except errors.APIError as exc:
                log.warning("job %s/%s: creating its Workload failed: %s", ns, name, exc.message)
                self._event(job, "Warning", "FailedWorkloadCreate",
                            f"Failed to create Workload for Job {name}: {exc.message}")
                return None
            self._event(job, "Normal", "WorkloadCreated", f"Created Workload {wl_name} for Job {name}")
        pg_name = pod_group_name(wl_name, tpl)
        if self.store.get_obj(POD_GROUPS, ns, pg_name) is None:
            template = workload["spec"]["podGroupTemplates"][0]
            body = {"apiVersion": POD_GROUPS.api_version, "kind": "PodGroup",
                    "metadata": {"name": pg_name, "namespace": ns, "ownerReferences": [
                        controller_ref(job),
                        {"apiVersion": WORKLOADS.api_version, "kind": "Workload", "name": wl_name,
                         "uid": workload["metadata"]["uid"]}]},
                    "spec": {"podGroupTemplateRef": {"workload": {"workloadName": wl_name,
                                                                  "podGroupTemplateName": template["name"]}},
                             "schedulingPolicy": copy.deepcopy(template["schedulingPolicy"])}}
            for key in ("schedulingConstraints", "disruptionMode"):
                if template.get(key) is not None:
                    body["spec"][key] = copy.deepcopy(template[key])
            try:
                self.store.create(POD_GROUPS, ns, body)
            except errors.APIError as exc:
                log.warning("job %s/%s: creating its PodGroup failed: %s", ns, name, exc.message)
                return None
        return pg_name

    @staticmethod
    def _pod(job: dict[str, Any], index: int | None, group: str | None) -> dict[str, Any]:
        name = job["metadata"]["name"]
        template = copy.deepcopy(_dict(job["spec"].get("template")))
        tmeta = _dict(template.get("metadata"))
        labels = dict(_dict(tmeta.get("labels")))
        annotations = dict(_dict(tmeta.get("annotations")))
        spec = _dict(template.get("spec"))
        meta: dict[str, Any] = {"generateName": f"{name}-" if index is None else f"{name}-{index}-",
                                "labels": labels, "finalizers": [TRACKING_FINALIZER],
                                "ownerReferences": [controller_ref(job)]}
        if index is not None:
            labels[COMPLETION_INDEX] = annotations[COMPLETION_INDEX] = str(index)
            if not spec.get("hostname"):
                spec["hostname"] = f"{name}-{index}"
            for key in ("initContainers", "containers"):
                for c in spec.get(key) or []:
                    env = c.setdefault("env", [])
                    if not any(_dict(e).get("name") == COMPLETION_INDEX_ENV for e in env):
                        env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {
                            "apiVersion": "v1", "fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}}})
        if annotations:
            meta["annotations"] = annotations
        if group is not None:
            spec["schedulingGroup"] = {"podGroupName": group}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    def _event(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        record_event(self.store, job, "Job", "batch/v1", CONTROLLER_NAME, type_, reason, message)


# ---------------------------------------------------------------------------- podgroup-protection

class PodGroupProtection(StoreLoop):
    """Removes the protection finalizer from a PodGroup being deleted once no pod names it."""

    def __init__(self, store: Store, tick: float = 0.02) -> None:
        super().__init__("simcluster-podgroup-protection", tick, log)
        self.store = store
        self._deleting: set[tuple[str, str]] = set()

    def _resync(self) -> tuple[Any, Any]:
        rv = str(self.store.rv)
        cursors = (self.store.watcher(POD_GROUPS, "", MATCH_ALL, rv, send_initial=False),
                   self.store.watcher(PODS, "", MATCH_ALL, rv, send_initial=False))
        self._deleting = {e.key for e in self.store.table(POD_GROUPS).objects.values()
                          if b'"deletionTimestamp"' in e.raw}
        return cursors

    def _step(self, cursors: tuple[Any, Any]) -> None:
        groups, pods = cursors
        changed = False
        while batch := groups.poll_events():
            changed = True
            for ev in batch:
                if ev.type == DELETED:
                    self._deleting.discard(ev.new.key)
                elif b'"deletionTimestamp"' in ev.new.raw:
                    self._deleting.add(ev.new.key)
        while pods.poll_events():
            changed = True
        if changed:
            for key in list(self._deleting):
                self._release(*key)

    def _release(self, ns: str, name: str) -> None:
        pg = self.store.get_obj(POD_GROUPS, ns, name)
        if pg is None:
            self._deleting.discard((ns, name))
            return
        finalizers = pg["metadata"].get("finalizers") or []
        if POD_GROUP_FINALIZER not in finalizers:
            return
        for entry in self.store.list(PODS, ns).entries:
            pod = entry.obj()   # a pod that has finished no longer holds its group
            if _dict(_dict(pod.get("spec")).get("schedulingGroup")).get("podGroupName") == name \
                    and _dict(pod.get("status")).get("phase") not in _TERMINAL:
                return
        pg["metadata"]["finalizers"] = [f for f in finalizers if f != POD_GROUP_FINALIZER]
        try:
            self.store.update(POD_GROUPS, ns, name, pg)
        except errors.APIError as exc:
            log.debug("podgroup %s/%s: %s", ns, name, exc.message)
