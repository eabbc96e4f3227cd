"""The ``pods/eviction`` subresource: a delete that asks the pod's disruption budget first.

``POST /api/v1/namespaces/NS/pods/NAME/eviction`` with a policy/v1 (or
policy/v1beta1) ``Eviction`` is how kubectl drain, the cluster autoscaler
and descheduler-style tools remove a pod without breaking a
PodDisruptionBudget. Following kube-apiserver 1.36's
``pkg/registry/core/pod/storage/eviction.go`` (EvictionREST.Create,
canIgnorePDB, checkAndDecrement, addConditionAndDeletePod), and checked
against it by ``tests/simcluster/test_eviction.py``:

* The body's ``metadata.name`` must be the URL's (400 "name in URL does not
  match name in Eviction object"), its kind Eviction or none; a missing pod
  is 404 ``pods "NAME" not found``.
* A pod that is Pending, Succeeded, Failed or already being deleted ignores
  any budget (canIgnorePDB): it is deleted at once, with a resourceVersion
  precondition unless it is finished or terminating.
* Otherwise the budgets of its namespace whose selector selects it count
  (a null selector selects nothing, ``{}`` everything; one that does not
  parse is skipped). More than one: 500 "This pod has more than one
  PodDisruptionBudget, which the eviction subresource does not support."
  None: the pod is deleted.
* One budget and a pod that is not Ready: with ``unhealthyPodEvictionPolicy:
  AlwaysAllow``, or with the default IfHealthyBudget while the budget has
  ``currentHealthy >= desiredHealthy > 0``, the pod is deleted (with a
  resourceVersion precondition) and the budget is left alone.
* Otherwise the budget is spent (checkAndDecrement): a status whose
  ``observedGeneration`` is behind the budget's generation is 429
  TooManyRequests "Cannot evict pod as it would violate the pod's disruption
  budget." with Retry-After 10 and the cause ``DisruptionBudget`` "The
  disruption budget NAME is still being processed by the server."; a
  negative ``disruptionsAllowed``, or more than 2000 ``disruptedPods``, is
  403 Forbidden; ``disruptionsAllowed: 0`` is the same 429 without
  Retry-After, its cause "The disruption budget NAME needs D healthy pods
  and has C currently". Else ``disruptionsAllowed`` drops by one (the
  DisruptionAllowed condition turning False when it reaches 0) and the pod
  goes into ``disruptedPods`` at the current time, written through the
  budget's status subresource, so the disruption controller stops counting
  it healthy before its deletion is seen.
* The delete (addConditionAndDeletePod) first checks the DeleteOptions'
  preconditions (409 Conflict on ``Pod``, upstream's words), then adds the
  pod condition ``DisruptionTarget=True``, reason ``EvictionByEvictionAPI``,
  message "Eviction API: evicting" through the status subresource, then
  deletes the pod with the eviction's DeleteOptions: its own
  ``terminationGracePeriodSeconds`` unless ``gracePeriodSeconds`` says
  otherwise (an unscheduled pod goes at once, as any delete of one; a
  negative grace period, which a DELETE would refuse, is one second).
* The answer is 201 with a Status ``Success``. ``dryRun`` (the query's or
  the DeleteOptions') checks everything and writes nothing.

Every step runs in one go on the event loop, so nothing can change between
reading the budget and writing it: upstream's retries on a conflict, and its
429 for a pod that turned Ready meanwhile, cannot happen here. Not
simulated: admission of the Eviction itself, the check that the query's and
the body's dryRun agree.

It must never import ``scheduler/`` or ``plugins/``.
"""

from __future__ import annotations

import copy
from typing import Any

from bench.simcluster import errors
from bench.simcluster.disruption import PDBS, update_allowed_condition
from bench.simcluster.resources import lookup
from bench.simcluster.selectors import NOTHING, SelectorError, label_selector_from_object
from bench.simcluster.store import Entry, Store, check_delete_preconditions, rfc3339

PODS = lookup("", "v1", "pods")

EVICTION_VERSIONS = ("policy/v1", "policy/v1beta1")   # what EvictionREST.AcceptsGroupVersion takes
MAX_DISRUPTED_POD_SIZE = 2000
ALWAYS_ALLOW = "AlwaysAllow"
DISRUPTION_TARGET = "DisruptionTarget"
REASON = "EvictionByEvictionAPI"
MESSAGE = "Eviction API: evicting"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def too_many_requests(cause: str, retry_after: int) -> errors.APIError:
    """errors.NewTooManyRequests with a DisruptionBudget cause; Retry-After only when it is not 0."""
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return errors.APIError(429, "TooManyRequests", VIOLATION, details,
                           headers={"Retry-After": str(retry_after)} if retry_after else None)


def evict(store: Store, ns: str, name: str, body: Any, dry_run: bool = False) -> dict[str, Any]:
    """EvictionREST.Create: evict pod ``ns/name`` as ``body`` asks; the Status to answer 201 with.

    Raises :class:`errors.APIError` for every refusal, with the real server's code and words.
    """
    options = _delete_options(body, ns, name)
    dry_run = dry_run or "All" in (options.get("dryRun") or [])
    pod_entry = store.get(PODS, ns, name)
    pod = pod_entry.obj()
    preconditions = dict(_dict(options.get("preconditions")))
    if _can_ignore_budget(pod):
        if _phase(pod) == "Pending" and not pod["metadata"].get("deletionTimestamp") \
                and not preconditions.get("resourceVersion"):
            preconditions["resourceVersion"] = str(pod_entry.rv)   # shouldEnforceResourceVersion
        _add_condition_and_delete(store, ns, name, options, preconditions, dry_run)
        return copy.deepcopy(SUCCESS)
    budgets = _budgets_of(store, ns, pod_entry)
    if len(budgets) > 1:
        raise errors.APIError(500, "", "This pod has more than one PodDisruptionBudget, "
                                       "which the eviction subresource does not support.")
    if budgets:
        pdb = budgets[0]
        if _spares_unhealthy(pdb, pod):
            if not preconditions.get("resourceVersion"):
                preconditions["resourceVersion"] = str(pod_entry.rv)
        else:
            _check_and_decrement(store, pdb, name, dry_run)
    _add_condition_and_delete(store, ns, name, options, preconditions, dry_run)
    return copy.deepcopy(SUCCESS)


def _delete_options(body: Any, ns: str, name: str) -> dict[str, Any]:
    """The Eviction's DeleteOptions, after the checks decoding and EvictionREST.Create make."""
    if not isinstance(body, dict):
        raise errors.bad_request("the object provided is unrecognized (must be of type Eviction)")
    kind, api_version = body.get("kind") or "", body.get("apiVersion") or ""
    if kind not in ("", "Eviction") or api_version not in ("", *EVICTION_VERSIONS):
        version = api_version.rpartition("/")[2]
        raise errors.bad_request(f'{kind} in version "{version}" cannot be handled as a Eviction: '
                                 f"converting ({version}.{kind}) to (policy.Eviction): unknown conversion")
    meta, options = body.get("metadata"), body.get("deleteOptions")
    if meta is not None and not isinstance(meta, dict):
        raise _undecodable(meta, "Eviction.metadata", "v1.ObjectMeta")
    if options is not None and not isinstance(options, dict):
        raise _undecodable(options, "Eviction.deleteOptions", "v1.DeleteOptions")
    meta, options = meta or {}, options or {}
    grace = options.get("gracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
        raise _undecodable(grace, "DeleteOptions.deleteOptions.gracePeriodSeconds", "int64")
    if options.get("preconditions") is not None and not isinstance(options["preconditions"], dict):
        raise _undecodable(options["preconditions"], "DeleteOptions.deleteOptions.preconditions",
                           "v1.Preconditions")
    if meta.get("namespace") and meta["namespace"] != ns:
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                 "the request")
    if (meta.get("name") or "") != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    return options


def _undecodable(value: Any, field: str, go_type: str) -> errors.APIError:
    """The decoder's 400 for a field of the wrong JSON type, in encoding/json's words."""
    if isinstance(value, bool):
        what = "bool"
    elif isinstance(value, (int, float)):
        what = f"number {value}"
    else:
        what = {str: "string", list: "array", dict: "object"}.get(type(value), "value")
    return errors.bad_request(f'Eviction in version "v1" cannot be handled as a Eviction: json: cannot unmarshal '
                              f"{what} into Go struct field {field} of type {go_type}")


def _phase(pod: dict[str, Any]) -> Any:
    return _dict(pod.get("status")).get("phase")


def _can_ignore_budget(pod: dict[str, Any]) -> bool:
    """canIgnorePDB: a finished, pending or terminating pod disrupts nothing more by going."""
    return _phase(pod) in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _is_ready(pod: dict[str, Any]) -> bool:
    conditions = _dict(pod.get("status")).get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _budgets_of(store: Store, ns: str, pod: Entry) -> list[dict[str, Any]]:
    """getPodDisruptionBudgets: the budgets of the namespace whose selector selects the pod."""
    found = []
    for entry in store.list(PDBS, ns).entries:
        pdb = entry.obj()
        try:
            selector = label_selector_from_object(_dict(pdb.get("spec")).get("selector"))
        except (SelectorError, AttributeError, TypeError):
            continue  # an invalid selector matches no pod
        if selector is not NOTHING and selector(pod.labels):
            found.append(pdb)
    return found


def _spares_unhealthy(pdb: dict[str, Any], pod: dict[str, Any]) -> bool:
    """Whether an unready pod goes without spending the budget (unhealthyPodEvictionPolicy)."""
    if _is_ready(pod):
        return False
    if _dict(pdb.get("spec")).get("unhealthyPodEvictionPolicy") == ALWAYS_ALLOW:
        return True
    status = _dict(pdb.get("status"))
    desired = status.get("desiredHealthy") or 0
    return (status.get("currentHealthy") or 0) >= desired > 0   # IfHealthyBudget, the default


def _check_and_decrement(store: Store, pdb: dict[str, Any], pod_name: str, dry_run: bool) -> None:
    """checkAndDecrement: refuse, or spend one disruption and record the pod as disrupted."""
    meta = pdb["metadata"]
    status = pdb.setdefault("status", {})
    if (status.get("observedGeneration") or 0) < (meta.get("generation") or 0):
        raise too_many_requests(f"The disruption budget {meta['name']} is still being processed by the server.", 10)
    allowed = status.get("disruptionsAllowed") or 0
    if allowed < 0:
        raise errors.forbidden("poddisruptionbudget", meta["name"], "pdb disruptions allowed is negative", "policy")
    disrupted = _dict(status.get("disruptedPods"))
    if len(disrupted) > MAX_DISRUPTED_POD_SIZE:
        raise errors.forbidden("poddisruptionbudget", meta["name"], "DisruptedPods map too big - too many "
                                                                    "evictions not confirmed by PDB controller",
                               "policy")
    if allowed == 0:
        raise too_many_requests(f"The disruption budget {meta['name']} needs {status.get('desiredHealthy') or 0} "
                                f"healthy pods and has {status.get('currentHealthy') or 0} currently", 0)
    status["disruptionsAllowed"] = allowed - 1
    now = store.clock()
    if allowed == 1:
        update_allowed_condition(status, now)
    if dry_run:
        return
    status["disruptedPods"] = {**disrupted, pod_name: rfc3339(now)}
    store.update(PDBS, meta["namespace"], meta["name"], pdb, "status")


def _add_condition_and_delete(store: Store, ns: str, name: str, options: dict[str, Any],
                              preconditions: dict[str, Any], dry_run: bool) -> None:
    """addConditionAndDeletePod: DisruptionTarget on the pod as it is now, then the delete."""
    if not dry_run:
        cur = store.get(PODS, ns, name)
        check_delete_preconditions(PODS, cur, preconditions)
        pod = cur.obj()
        if _set_disruption_target(pod, rfc3339(store.clock())):
            written = store.update(PODS, ns, name, pod, "status")
            if preconditions.get("resourceVersion"):
                preconditions["resourceVersion"] = str(written.rv)  # it was this eviction that moved it
    grace = options.get("gracePeriodSeconds")
    if grace is not None and grace < 0:
        grace = 1  # the pod strategy's CheckGracefulDelete: the DELETE handler's 422 never sees an eviction's
    store.delete(PODS, ns, name, grace, preconditions or None, dry_run)


def _set_disruption_target(pod: dict[str, Any], now: str) -> bool:
    """podutil.UpdatePodCondition with DisruptionTarget=True; whether anything changed."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    want = {"type": DISRUPTION_TARGET, "status": "True", "lastProbeTime": None, "lastTransitionTime": now,
            "reason": REASON, "message": MESSAGE}
    for i, c in enumerate(conditions):
        if isinstance(c, dict) and c.get("type") == DISRUPTION_TARGET:
            if c.get("status") == "True":
                want["lastTransitionTime"] = c.get("lastTransitionTime")
            if c == want:
                return False
            conditions[i] = want
            return True
    conditions.append(want)
    return True
