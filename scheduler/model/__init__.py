"""Slotted pod and node records, parsed straight from API JSON: one module per kind of record and its parser.

The informers hand raw dicts (orjson) to :func:`parse_pod` and
:func:`parse_node`; the generated client models are never built. Records
are frozen: mutable scheduling state lives in the cache and the queue.

Parsing never raises on a malformed object. What the scheduler cannot
understand (an unparseable quantity, an unknown toleration operator) is
recorded in ``invalid`` with the field path, and the scheduler reports it on
the pod (FailedScheduling) instead of crashing or dropping the pod.

* ``quantity``: resource names, quantities in the scheduler's units;
* ``selectors``: label selectors, node selector terms, pod affinity and spread terms;
* ``pod``, ``node``: the Pod and Node records and their parsers;
* ``podgroup``: the one PodGroup record (for every PodGroup API) and gang member counting;
* ``storage``: PersistentVolumeClaims, PersistentVolumes, StorageClasses;
* ``policy``: PodDisruptionBudgets;
* ``fields``: the parsing helpers the others share.

This package re-exports every public name, so ``from scheduler.model import Pod`` is how the rest of
tandem (and every plugin) imports a record. A submodule imports its siblings directly, never this
package (that would be an import circle).
"""

from scheduler.model.quantity import (
    CPU, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, EPHEMERAL_STORAGE, INT32_MAX, INT64_MAX, MEMORY, PODS,
    QuantityError, canonical, parse_quantity,
)
from scheduler.model.selectors import (
    DO_NOT_SCHEDULE, EVERYTHING, NOTHING, POLICY_HONOR, POLICY_IGNORE, SCHEDULE_ANYWAY, SELECTOR_DOES_NOT_EXIST,
    SELECTOR_EXISTS, SELECTOR_IN, SELECTOR_NOT_IN, AffinityTerm, LabelSelector, PodAffinity, PodSelection,
    Requirement, SpreadConstraint, parse_label_selector,
)
from scheduler.model.node import (
    Node, Taint, parse_node,
)
from scheduler.model.pod import (
    CONFLICT_DISK_SOURCES, POD_GROUP_ANNOTATION, POD_GROUP_LABEL, POD_RESIZE_PENDING, PREEMPTION_BY_SCHEDULER,
    RESIZE_INFEASIBLE, HostPort, OwnerRef, Pod, Toleration, marked_preempted, parse_pod, pod_requests,
)
from scheduler.model.podgroup import (
    DISRUPTION_MODE_ANNOTATION, DISRUPTION_POD, DISRUPTION_POD_GROUP, DISRUPTION_SINGLE, NOT_READY_FOR_SCHEDULING,
    POD_GROUP_API_VERSION, POD_GROUP_PODS_READY, POD_GROUP_REQUEUING_LIMIT_EXCEEDED, POD_GROUP_SCHEDULED, PodGroup,
    could_run, gang_members_present, gang_waiting_message, parse_pod_group,
    NATIVE_KEY_PREFIX, NATIVE_POD_GROUP_API_VERSION, TOPOLOGY_KEY_ANNOTATION, native_gang_key,
    parse_native_pod_group, pod_group_path, split_gang_key, group_conflict, missing_group_message,
)
from scheduler.model.csi import (
    IN_TREE_PLUGINS, MIGRATABLE_PLUGINS, MIGRATED_PLUGINS_ANNOTATION, CSINode, VolumeAttachment, in_tree_driver,
    parse_csinode, parse_volume_attachment,
)
from scheduler.model.storage import (
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, ANN_STORAGE_CLASS, BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER, MULTI_ZONE_DELIMITER,
    NOT_SUPPORTED_PROVISIONER, PV_TOPOLOGY_LABELS, VOLUME_AVAILABLE, ClaimRef, CSIDriver, CSIStorageCapacity,
    PersistentVolume, PersistentVolumeClaim, StorageClass, parse_csi_driver, parse_csi_storage_capacity, parse_pv,
    parse_pvc, parse_storage_class, pvc_volume_claim_keys, pvc_volume_claims, uses_pvc_volume_claim,
)
from scheduler.model.policy import (
    PodDisruptionBudget, parse_pdb,
)
from scheduler.model.fields import (
    parse_time,
)

__all__ = [
    "CPU", "DEFAULT_MEMORY_REQUEST", "DEFAULT_MILLI_CPU_REQUEST", "EPHEMERAL_STORAGE", "INT32_MAX", "INT64_MAX",
    "MEMORY", "PODS", "QuantityError", "canonical", "parse_quantity", "DO_NOT_SCHEDULE", "EVERYTHING", "NOTHING",
    "POLICY_HONOR", "POLICY_IGNORE", "SCHEDULE_ANYWAY", "SELECTOR_DOES_NOT_EXIST", "SELECTOR_EXISTS", "SELECTOR_IN",
    "SELECTOR_NOT_IN", "AffinityTerm", "LabelSelector", "PodAffinity", "PodSelection", "Requirement",
    "SpreadConstraint", "parse_label_selector", "Node", "Taint", "parse_node", "CONFLICT_DISK_SOURCES",
    "POD_GROUP_ANNOTATION", "POD_GROUP_LABEL", "POD_RESIZE_PENDING", "PREEMPTION_BY_SCHEDULER", "RESIZE_INFEASIBLE",
    "HostPort", "OwnerRef", "Pod", "Toleration", "marked_preempted", "parse_pod", "pod_requests",
    "DISRUPTION_MODE_ANNOTATION", "DISRUPTION_POD", "DISRUPTION_POD_GROUP", "DISRUPTION_SINGLE",
    "NOT_READY_FOR_SCHEDULING", "POD_GROUP_API_VERSION", "POD_GROUP_PODS_READY",
    "POD_GROUP_REQUEUING_LIMIT_EXCEEDED", "POD_GROUP_SCHEDULED", "PodGroup", "could_run", "gang_members_present",
    "gang_waiting_message", "parse_pod_group", "ANN_BIND_COMPLETED", "ANN_BOUND_BY_CONTROLLER", "ANN_SELECTED_NODE",
    "ANN_STORAGE_CLASS", "NOT_SUPPORTED_PROVISIONER", "VOLUME_AVAILABLE", "ClaimRef", "CSIDriver", "CSIStorageCapacity",
    "parse_csi_driver", "parse_csi_storage_capacity", "BINDING_IMMEDIATE",
    "NATIVE_KEY_PREFIX", "NATIVE_POD_GROUP_API_VERSION", "TOPOLOGY_KEY_ANNOTATION", "native_gang_key",
    "parse_native_pod_group", "pod_group_path", "split_gang_key", "group_conflict", "missing_group_message",
    "BINDING_WAIT_FOR_FIRST_CONSUMER", "MULTI_ZONE_DELIMITER", "PV_TOPOLOGY_LABELS", "PersistentVolume",
    "PersistentVolumeClaim", "StorageClass", "parse_pv", "parse_pvc", "parse_storage_class", "pvc_volume_claims", "pvc_volume_claim_keys",
    "uses_pvc_volume_claim", "IN_TREE_PLUGINS", "MIGRATED_PLUGINS_ANNOTATION", "CSINode", "VolumeAttachment",
    "in_tree_driver", "parse_csinode", "parse_volume_attachment", "MIGRATABLE_PLUGINS", "PodDisruptionBudget", "parse_pdb", "parse_time",
]
