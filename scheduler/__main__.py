"""``tandem-scheduler --config FILE [--kubeconfig PATH] [-v]``.

Loads a KubeSchedulerConfiguration (or the default profile
``tandem-scheduler``), connects with the kubeconfig (in-cluster config when
none is given), and schedules until SIGTERM: the first signal stops taking
new pods, drains binds in flight and releases the leader-election Lease, a
second one exits at once (uvicorn's habit). A replica that loses its Lease
exits with code 1, as kube-scheduler does, so that it is restarted as a
follower. A bad config is one line naming the field, and exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import ssl
import sys

from scheduler import secureserving as ss
from scheduler.framework.registry import ConfigError
from scheduler.podgroups import STATUS_BURST, STATUS_QPS


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tandem-scheduler", description="A secondary Kubernetes scheduler.")
    p.add_argument("--config", help="KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    p.add_argument("--bind-address", default="0.0.0.0", help="address for /healthz, /readyz, /livez, /metrics")
    p.add_argument("--secure-port", "--port", dest="port", type=int, default=10259,
                   help="port for health and metrics, HTTPS with delegated authentication and authorization "
                        "(0 disables)")
    add_serving_flags(p)
    p.add_argument("--podgroup-status-qps", type=float, default=STATUS_QPS,
                   help="PodGroup status writes per second, over all groups (default %(default)s); a burst of "
                        "gangs then sees each group's newest state a little later instead of slowing binds")
    p.add_argument("--podgroup-status-burst", type=int, default=STATUS_BURST,
                   help="PodGroup status writes allowed at once above the rate (default %(default)s)")
    p.add_argument("-v", "--v", dest="verbosity", type=int, nargs="?", const=2, default=0,
                   help="log verbosity: 0 warnings, 1-2 info, 3+ debug (klog-style -v=N)")
    _leader_election_flags(p)
    return p


# kube-scheduler's leader election flags: given, each overrides the file's leaderElection field
LEADER_ELECTION_FLAGS = {"leader_elect": "leader_elect", "leader_elect_lease_duration": "lease_duration",
                         "leader_elect_renew_deadline": "renew_deadline", "leader_elect_retry_period": "retry_period",
                         "leader_elect_resource_lock": "resource_lock", "leader_elect_resource_name": "resource_name",
                         "leader_elect_resource_namespace": "resource_namespace"}


def _leader_election_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("leader election", "each flag given overrides the configuration's leaderElection field "
                             "(as kube-scheduler's do)")
    g.add_argument("--leader-elect", type=_go_bool, nargs="?", const=True, metavar="BOOL",
                   help="take the Lease before scheduling, so that only one replica schedules (--leader-elect=false: "
                        "schedule at once)")
    for flag, what in (("lease-duration", "how long followers wait after the last renewal they saw"),
                       ("renew-deadline", "how long the leader retries renewing before it gives up"),
                       ("retry-period", "how long replicas wait between attempts")):
        g.add_argument(f"--leader-elect-{flag}", type=_go_duration, metavar="DURATION", help=what)
    g.add_argument("--leader-elect-resource-lock", metavar="KIND", help='the lock\'s kind: only "leases"')
    g.add_argument("--leader-elect-resource-name", metavar="NAME", help="the Lease's name")
    g.add_argument("--leader-elect-resource-namespace", metavar="NAMESPACE", help="the Lease's namespace")


def _go_bool(text: str) -> bool:
    """strconv.ParseBool, as pflag reads --flag=value."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}")


def _go_duration(text: str) -> float:
    from scheduler.config import parse_duration

    try:
        seconds = parse_duration(text, "value")
    except ConfigError:
        raise argparse.ArgumentTypeError(f'invalid duration "{text}" (Go syntax such as "15s" or "1m30s")') from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return seconds


def add_serving_flags(p: argparse.ArgumentParser) -> None:
    """kube-scheduler's secure serving, authentication and authorization flags (scheduler/secureserving.py)."""
    g = p.add_argument_group("secure serving")
    g.add_argument("--tls-cert-file", help="x509 certificate for HTTPS (with intermediates after it); without it "
                                           "and --tls-private-key-file a self-signed one is generated at start")
    g.add_argument("--tls-private-key-file", help="the private key of --tls-cert-file")
    g.add_argument("--cert-dir", help="folder for the generated certificate (tandem-scheduler.crt/.key, reused "
                                      "when present); default: kept in memory")
    g.add_argument("--insecure-serving", action="store_true",
                   help="serve plain HTTP with no authentication or authorization, for local runs only")
    g.add_argument("--authentication-token-webhook-cache-ttl", dest="token_ttl", type=_go_duration,
                   default=ss.TOKEN_CACHE_TTL, metavar="DURATION",
                   help="how long a TokenReview answer is cached (default 10s)")
    g.add_argument("--authorization-webhook-cache-authorized-ttl", dest="authorized_ttl", type=_go_duration,
                   default=ss.AUTHORIZED_TTL, metavar="DURATION",
                   help="how long an allowing SubjectAccessReview answer is cached (default 10s)")
    g.add_argument("--authorization-webhook-cache-unauthorized-ttl", dest="unauthorized_ttl", type=_go_duration,
                   default=ss.UNAUTHORIZED_TTL, metavar="DURATION",
                   help="how long a refusing SubjectAccessReview answer is cached (default 10s)")
    g.add_argument("--authorization-always-allow-paths", dest="always_allow_paths", type=_paths,
                   default=ss.ALWAYS_ALLOW_PATHS, metavar="PATHS",
                   help="comma-separated paths served without credentials (default /healthz,/readyz,/livez; "
                        "a trailing * matches a prefix)")


def _paths(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def serving_options(args: argparse.Namespace) -> ss.ServingOptions:
    """The ServingOptions the flags describe; ValueError when they contradict each other."""
    return ss.ServingOptions(insecure=args.insecure_serving, cert_file=args.tls_cert_file,
                          key_file=args.tls_private_key_file, cert_dir=args.cert_dir, token_ttl=args.token_ttl,
                          authorized_ttl=args.authorized_ttl, unauthorized_ttl=args.unauthorized_ttl,
                          always_allow_paths=args.always_allow_paths)


async def _serve(args: argparse.Namespace, config) -> int:
    from scheduler import gcpause
    from scheduler.app import App

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            logging.getLogger("tandem").warning("second signal: exiting now")
            sys.exit(1)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    app = App(config, kubeconfig=args.kubeconfig, health_host=args.bind_address,
              health_port=args.port or None, podgroup_status_qps=args.podgroup_status_qps,
              podgroup_status_burst=args.podgroup_status_burst, serving=args.serving)
    # this process's collections timed into its metrics, and what survives each frozen, so that no collection
    # walks the informers' caches again (scheduler/gcpause.py; never on import: tests embed the App)
    with gcpause.installed(app.metrics.registry):
        async with app:
            freeze_startup_heap()
            waiter = asyncio.create_task(app.wait())
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
    # a lost lease ends the process with an error, as kube-scheduler's "leaderelection lost": the Deployment
    # restarts it, as a follower
    return 1 if app.lost_leadership else 0


def tune_malloc() -> None:
    """Keep glibc from returning large numpy temporaries to the OS after every cycle.

    Above M_MMAP_THRESHOLD each allocation is its own mmap, unmapped on free and
    page-faulted back on the next cycle; at 15,000 nodes that costs several
    times the arithmetic. Raising the mmap and trim thresholds keeps such
    buffers in the heap. A no-op where glibc is not the allocator.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 64 * 1024 * 1024)
        libc.mallopt(m_trim_threshold, 256 * 1024 * 1024)
    except (OSError, AttributeError):
        pass


GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Collect cycles less often: the scheduler's heap is JSON-shaped and almost never cyclic.

    Pods and nodes arrive as orjson dicts and lists (no reference cycles:
    reference counting frees them), and a burst allocates hundreds of them
    per pod. With CPython's default thresholds (700, 10, 10) that burst ran
    a full collection every ~0.5 s, each walking every cached pod and node
    (150-220 ms at 5,000 nodes), and every one of them freed nothing
    (``gc.callbacks``: ``collected 0``). 50,000 young objects between
    collections keeps cyclic garbage (asyncio futures, tracebacks) bounded
    while full collections become rare. Measured on GangBasic and
    SchedulingBasic at 5,000 nodes: 12-20% less scheduler CPU, same RSS.
    """
    import gc

    gc.set_threshold(*GC_THRESHOLDS)


def freeze_startup_heap() -> None:
    """Move what the initial lists built (the node and pod caches) out of the collector's sight.

    ``gc.freeze`` only stops the cycle collector from walking these objects;
    reference counting still frees each one when an update replaces it. Called
    once, when the caches are synced and before scheduling starts. With the
    thresholds above full collections are rare, but each one walks every
    tracked object: after a restart in a cluster of 50,000 pods that is
    millions of dicts and a stall of the event loop measured in seconds. On
    the 5,000-node benchmarks it makes no measurable difference.
    """
    import gc

    gc.collect()
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    tune_gc()
    if args.podgroup_status_qps <= 0:
        p.error(f"--podgroup-status-qps must be greater than 0, got {args.podgroup_status_qps}")
    if args.podgroup_status_burst < 1:
        p.error(f"--podgroup-status-burst must be at least 1, got {args.podgroup_status_burst}")
    try:
        args.serving = serving_options(args)
    except ValueError as exc:
        p.error(str(exc))
    if args.serving.cert_file and args.port:
        # a certificate that cannot be read is one line and exit code 1, not a traceback after the informers synced
        try:
            ss.server_ssl_context(args.serving)
        except (OSError, ssl.SSLError) as exc:
            print(f"tandem-scheduler: cannot use --tls-cert-file {args.serving.cert_file} / --tls-private-key-file "
                  f"{args.serving.key_file}: {exc}", file=sys.stderr)
            return 1
    tune_malloc()
    level = logging.WARNING if args.verbosity <= 0 else logging.INFO if args.verbosity <= 2 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from scheduler.config import load_config, with_leader_election

    try:
        config = load_config(args.config)
        flags = {field: getattr(args, dest) for dest, field in LEADER_ELECTION_FLAGS.items()
                 if getattr(args, dest) is not None}
        if flags:
            config = with_leader_election(config, **flags)
    except ConfigError as exc:
        print(f"tandem-scheduler: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tandem-scheduler: cannot read --config {args.config}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        import uvloop
        return uvloop.run(_serve(args, config))
    except ImportError:
        return asyncio.run(_serve(args, config))


if __name__ == "__main__":
    sys.exit(main())
