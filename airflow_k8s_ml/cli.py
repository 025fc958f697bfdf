"""``airflow-k8s-ml``: operate the embedded local cluster and run the demo.

airflow-k8s-ml local up [--state-dir D] [--port N] [--cpu 8] [--memory 32Gi] [--gpus 0] [--no-tls]
                        [--deny-host-path] [--run-as-non-root enforce|warn] [--gpu-quota N]
airflow-k8s-ml local status
airflow-k8s-ml local down [--purge]   (the state dir keeps the cluster's objects; --purge deletes it)
airflow-k8s-ml demo [--output D]
airflow-k8s-ml standalone [--port N] [--home D] [--dags-folder D] [--ha]

Every command runs the test bed (``airflow_k8s_ml.testbed``), whose dependencies come with the
``local`` extra.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

# What the ``local`` extra brings (pyproject.toml), by import name: the test bed needs each of them.
LOCAL_EXTRA_MODULES = ("cryptography", "moto", "psutil", "httpx")


def missing_local_extra() -> list[str]:
    """The modules of the ``local`` extra that this environment lacks (none once it is installed)."""
    return [name for name in LOCAL_EXTRA_MODULES if importlib.util.find_spec(name) is None]


def _local(args: argparse.Namespace) -> int:
    from .testbed.local_cluster import daemon
    from .testbed.local_cluster.__main__ import options_from

    if args.action == "up":
        options = options_from(args)
        kubeconfig = daemon.start_background(options)
        print(f"local cluster is up (state dir {options.state_dir})", file=sys.stderr)
        print(f"export KUBECONFIG={kubeconfig}")
        return 0
    state_dir = args.state_dir.resolve()
    if args.action == "down":
        stopped = daemon.stop_background(state_dir)
        print("local cluster stopped" if stopped else "local cluster was not running", file=sys.stderr)
        if args.purge:
            return _purge(state_dir)
        return 0
    pid = daemon.pid_of(state_dir)
    if pid is None or not daemon.ping(state_dir):
        print("local cluster: not running")
        return 1
    version = daemon.request(state_dir, "/version")
    pods = daemon.request(state_dir, "/api/v1/pods")["items"]
    jobs = daemon.request(state_dir, "/apis/batch/v1/jobs")["items"]
    print(
        json.dumps(
            {
                "state": "running",
                "pid": pid,
                "kubeconfig": str(state_dir / "kubeconfig"),
                "version": version.get("gitVersion"),
                "pods": len(pods),
                "jobs": len(jobs),
            },
            indent=2,
        )
    )
    return 0


def _purge(state_dir: Path) -> int:
    """Delete the state dir (objects, identity, logs, volumes), but only one that is a cluster's."""
    import shutil

    if not state_dir.exists():
        return 0
    if not any((state_dir / marker).exists() for marker in ("cluster.db", "kubeconfig", "token")):
        print(f"not deleting {state_dir}: it does not look like a local cluster's state dir", file=sys.stderr)
        return 1
    shutil.rmtree(state_dir)
    print(f"deleted {state_dir}", file=sys.stderr)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .testbed.demo import main as demo_main

    return demo_main(args.output)


def _standalone(args: argparse.Namespace) -> int:
    from .testbed.standalone import main as standalone_main

    return standalone_main(args.home, args.port, args.dags_folder, ha=args.ha)


def main(argv: list[str] | None = None) -> int:
    missing = missing_local_extra()
    if missing:
        print(
            "airflow-k8s-ml: the local cluster, the demo and standalone are the test bed, installed with the "
            f"'local' extra: pip install 'airflow-k8s-ml[local]' (missing: {', '.join(missing)})",
            file=sys.stderr,
        )
        return 2
    from .testbed.local_cluster.__main__ import add_serve_arguments

    parser = argparse.ArgumentParser(prog="airflow-k8s-ml", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    local = sub.add_parser("local", help="operate the embedded local cluster")
    local.add_argument("action", choices=["up", "down", "status"])
    local.add_argument(
        "--purge", action="store_true", help="with down: delete the state dir (objects, CA, token)"
    )
    add_serve_arguments(local)
    local.set_defaults(func=_local)
    demo = sub.add_parser("demo", help="run the nightly DAG end to end on the local cluster and local S3")
    demo.add_argument("--output", type=Path, default=Path("demo-output"))
    demo.set_defaults(func=_demo)
    from .testbed.standalone import DEFAULT_HOME

    standalone = sub.add_parser(
        "standalone", help="the Airflow UI (all components) over the local cluster and local S3, one command"
    )
    standalone.add_argument("--port", type=int, default=0, help="API server / UI port (default: a free one)")
    standalone.add_argument(
        "--home", type=Path, default=DEFAULT_HOME, help=f"state and Airflow home (default {DEFAULT_HOME})"
    )
    standalone.add_argument("--dags-folder", type=Path, default=None, help="default: the repository's dags/")
    standalone.add_argument(
        "--ha",
        action="store_true",
        help="as in production: PostgreSQL, Redis, CeleryExecutor (2 workers), 2 schedulers, 2 triggerers",
    )
    standalone.set_defaults(func=_standalone)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
