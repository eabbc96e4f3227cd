"""``python -m bench.simcluster``: run the simulated cluster until SIGTERM.

    python -m bench.simcluster --port 0 --nodes 100 --zones 3 --kubeconfig-out sim.kubeconfig

prints the URL it listens on, writes a kubeconfig any tool can use, and
serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

import orjson
import yaml

from bench.simcluster.agent import AgentConfig, parse_seconds
from bench.simcluster.cluster import DEFAULT_NODE_TEMPLATE, SimCluster
from bench.simcluster.faults import FaultRule, Faults
from bench.simcluster.resources import NATIVE_GANGS
from bench.simcluster.volumes import PROVISIONER, VolumeConfig


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.simcluster",
                                description="A kube-apiserver stand-in with simulated nodes, a kubelet stand-in, "
                                            "a disruption controller and the volume controllers.")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 picks a free one)")
    p.add_argument("--nodes", type=int, default=0, help="nodes to create from the template")
    p.add_argument("--zones", type=int, default=3, help="spread nodes over this many zones (label topology.kubernetes.io/zone)")
    p.add_argument("--node-template", type=Path, help="YAML or JSON Node used as template (default: 4 cpu, 32Gi, 110 pods)")
    p.add_argument("--kubeconfig-out", type=Path, help="write a kubeconfig for this cluster here")
    p.add_argument("--watch-window", type=int, default=20_000,
                   help="events retained per resource; watches from older resourceVersions get 410 Expired")
    p.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds between watch bookmarks")
    p.add_argument("--no-agent", action="store_true",
                   help="do not run the node agent, nor the disruption, Job and podgroup-protection controllers "
                        "(pods stay Pending after binding)")
    p.add_argument("--no-volume-controllers", action="store_true",
                   help="do not run the PV controller nor the test provisioner (claims stay Pending, no CSINodes)")
    p.add_argument("--csi-attach-limit", type=int, default=None, metavar="COUNT",
                   help=f"allocatable.count of the {PROVISIONER} driver in every CSINode (default: no limit; "
                        "per node: annotation simcluster.tandem.dev/csi-attach-limit)")
    p.add_argument("--ready-delay", type=float, default=1.0, help="seconds from bind to Running and Ready")
    p.add_argument("--run-time", type=float, default=0.0, help="seconds a running pod runs before it Succeeds (0: forever)")
    p.add_argument("--termination-delay", type=termination_delay, default=AgentConfig().termination_delay,
                   metavar="SECONDS|grace",
                   help="seconds from a graceful delete to the pod's removal, at most its grace period "
                        "('grace': the whole grace period; per pod: annotation "
                        "simcluster.tandem.dev/termination-seconds)")
    p.add_argument("--fault", action="append", default=[], metavar="VERB:RESOURCE:key=value,...",
                   help="inject faults, e.g. create:pods/binding:error_rate=0.1,error_code=500 "
                        "or '*:*:throttle_rate=0.05,retry_after=1' or list:pods:latency=0.2")
    p.add_argument("--runtime-config", type=runtime_config, default=False, metavar="GROUP/VERSION=true",
                   help="enable an alpha API as kube-apiserver's flag does; only "
                        f"{NATIVE_GANGS}=true (upstream's native gang API: PodGroup, Workload; "
                        "the Job controller then creates them for qualifying Jobs)")
    p.add_argument("--watch-drop-interval", type=float, default=0.0, help="cut every watch after this many seconds")
    p.add_argument("-v", "--verbose", action="count", default=0)
    return p


def termination_delay(text: str) -> float | None:
    """``--termination-delay``: seconds, or ``grace`` for the pod's whole grace period (AgentConfig's None)."""
    if text == "grace":
        return None
    seconds = parse_seconds(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"expected seconds (a number >= 0) or 'grace', got {text!r}")
    return seconds


def runtime_config(text: str) -> bool:
    """``--runtime-config``: whether it enables the native gang API (the only alpha API simulated)."""
    enabled = False
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if key != NATIVE_GANGS or value.lower() not in ("", "true", "false"):
            raise argparse.ArgumentTypeError(f"{item!r}: only {NATIVE_GANGS}=true|false is simulated")
        enabled = value.lower() != "false"
    return enabled


def volume_config(args: argparse.Namespace) -> VolumeConfig | None:
    """The volume controllers the flags ask for; None: none run."""
    return None if args.no_volume_controllers else VolumeConfig(attach_limit=args.csi_attach_limit)


def load_template(path: Path) -> dict:
    text = path.read_text()
    try:
        obj = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else orjson.loads(text)
    except (yaml.YAMLError, orjson.JSONDecodeError) as exc:
        raise SystemExit(f"--node-template {path}: cannot parse: {exc}")
    if not isinstance(obj, dict) or obj.get("kind", "Node") != "Node":
        raise SystemExit(f"--node-template {path}: expected a Node object")
    return obj


async def serve(args: argparse.Namespace) -> None:
    try:
        faults = Faults(rules=[FaultRule.parse(s) for s in args.fault], watch_drop_interval=args.watch_drop_interval)
    except ValueError as exc:
        raise SystemExit(str(exc))
    agent = None if args.no_agent else AgentConfig(ready_delay=args.ready_delay, run_time=args.run_time,
                                                   termination_delay=args.termination_delay)
    volumes = volume_config(args)
    template = load_template(args.node_template) if args.node_template else DEFAULT_NODE_TEMPLATE
    cluster = SimCluster(nodes=args.nodes, zones=args.zones, port=args.port, node_template=template, agent=agent,
                         faults=faults, volumes=volumes, watch_window=args.watch_window, bookmark_interval=args.bookmark_interval,
                         kubeconfig=args.kubeconfig_out, native_gangs=args.runtime_config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with cluster:
        print(f"simcluster listening on {cluster.url} with {args.nodes} nodes", flush=True)
        if args.kubeconfig_out:
            print(f"kubeconfig written to {args.kubeconfig_out}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import uvloop
        uvloop.run(serve(args))
    except ImportError:
        asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
