"""A kube-apiserver stand-in with simulated nodes, for machines without Kubernetes.

``SimCluster`` is the entry point; see README.md, "The simulated cluster".
"""

from bench.simcluster.cluster import SimCluster, write_kubeconfig

__all__ = ["SimCluster", "write_kubeconfig"]
