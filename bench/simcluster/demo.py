"""``make run``: bring the simulated cluster up and show it working.

Starts the cluster with a handful of nodes, writes a kubeconfig, then talks
to it the way any client would (kubernetes-asyncio over HTTP): lists the
nodes, creates a pod, binds it through pods/binding, and watches the node
agent turn it Running and Ready. Then it keeps serving until Ctrl-C (or
exits at once with ``--once``) so kubectl can be pointed at it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from kubernetes_asyncio import client, config, watch

from bench.simcluster.agent import AgentConfig
from bench.simcluster.cluster import SimCluster


async def demo(nodes: int, zones: int, kubeconfig: Path, once: bool, port: int) -> None:
    async with SimCluster(nodes=nodes, zones=zones, port=port, kubeconfig=kubeconfig,
                          agent=AgentConfig(ready_delay=0.5)) as cluster:
        print(f"simulated cluster up at {cluster.url}  (kubeconfig: {kubeconfig})\n")
        api_client = await config.new_client_from_config(config_file=str(kubeconfig))
        async with api_client:
            v1 = client.CoreV1Api(api_client)
            node_list = await v1.list_node()
            print(f"{'NODE':<10} {'ZONE':<8} {'CPU':>4} {'MEMORY':>7} {'PODS':>5}  READY")
            for n in node_list.items:
                ready = next((c.status for c in n.status.conditions if c.type == "Ready"), "Unknown")
                print(f"{n.metadata.name:<10} {n.metadata.labels.get('topology.kubernetes.io/zone', '-'):<8} "
                      f"{n.status.allocatable['cpu']:>4} {n.status.allocatable['memory']:>7} "
                      f"{n.status.allocatable['pods']:>5}  {ready}")

            pod = client.V1Pod(metadata=client.V1ObjectMeta(name="hello"),
                               spec=client.V1PodSpec(containers=[client.V1Container(
                                   name="app", image="registry.k8s.io/pause:3.10",
                                   resources=client.V1ResourceRequirements(requests={"cpu": "500m", "memory": "1Gi"}))]))
            created = await v1.create_namespaced_pod("default", pod)
            print(f"\ncreated pod default/hello (phase {created.status.phase}, schedulerName "
                  f"{created.spec.scheduler_name}, resourceVersion {created.metadata.resource_version})")
            target = node_list.items[0].metadata.name
            # the generated client cannot parse the binding response (a Status, not a Binding): read it raw
            await v1.create_namespaced_pod_binding(
                "hello", "default", client.V1Binding(metadata=client.V1ObjectMeta(name="hello"),
                                                     target=client.V1ObjectReference(kind="Node", name=target)),
                _preload_content=False)
            print(f"bound it to {target} through pods/binding; watching it start:")
            t0 = time.monotonic()
            w = watch.Watch()
            async for event in w.stream(v1.list_namespaced_pod, "default", field_selector="metadata.name=hello",
                                        resource_version=created.metadata.resource_version, timeout_seconds=10):
                p = event["object"]
                conds = {c.type: c.status for c in (p.status.conditions or [])}
                print(f"  {event['type']:<8} rv={p.metadata.resource_version:<6} node={p.spec.node_name} "
                      f"phase={p.status.phase} Ready={conds.get('Ready', '-')}  (+{time.monotonic() - t0:.2f}s)")
                if conds.get("Ready") == "True":
                    break
            await w.close()
        if once:
            return
        print(f"\nserving until Ctrl-C; try: kubectl --kubeconfig {kubeconfig} get nodes")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.simcluster.demo")
    p.add_argument("--nodes", type=int, default=6)
    p.add_argument("--zones", type=int, default=3)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--kubeconfig", type=Path, default=Path(".tandem/sim.kubeconfig"))
    p.add_argument("--once", action="store_true", help="exit after the demo instead of serving")
    args = p.parse_args(argv)
    try:
        asyncio.run(demo(args.nodes, args.zones, args.kubeconfig, args.once, args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
