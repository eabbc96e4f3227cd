"""What the scheduling cycle reads, kept from informer events: one module per index.

* ``cache``: :class:`~scheduler.state.cache.Cache`, the owner that applies informer events: the pods
  bound or assumed to nodes, charged to the node table (scheduler/framework/nodetable.py), and the
  indexes below;
* ``nominations``: pods nominated to a node, and what they add to a cycle's Filter;
* ``gangs``: the one gang index (PodGroups, their pods, their members on nodes);
* ``volumes``: PersistentVolumeClaims, PersistentVolumes, StorageClasses;
* ``runs``: pipeline runs (and shared workspace claims) and the node each holds, finished pods included;
* ``spreadselectors``: the Services' and controllers' selectors, for PodTopologySpread's system defaults.

Nothing is re-exported here: each importer names the module it uses.
"""
