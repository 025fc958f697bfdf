"""``python -m airflow_k8s_ml.testbed.local_cluster serve [--state-dir D] [--port N] ...``: the server,
in the foreground."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from .daemon import DEFAULT_STATE_DIR, ServeOptions, serve_forever


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="where the kubeconfig, token, CA, logs and volumes live",
    )
    parser.add_argument("--port", type=int, default=0, help="API port on 127.0.0.1 (0 = any free port)")
    parser.add_argument("--cpu", default="8", help="node CPU capacity")
    parser.add_argument("--memory", default="32Gi", help="node memory capacity")
    parser.add_argument("--gpus", type=int, default=0, help="node nvidia.com/gpu capacity")
    parser.add_argument(
        "--gpu-quota",
        type=int,
        default=None,
        help="create Kueue's default-flavor, cluster-queue (this many nvidia.com/gpu, the node's cpu and "
        "memory) and the LocalQueue user-queue in default",
    )
    parser.add_argument("--no-tls", dest="tls", action="store_false", help="serve plain HTTP (loopback only)")
    parser.add_argument(
        "--deny-host-path",
        action="store_true",
        help="refuse pods with hostPath volumes (403 at create): a hostPath is the host's own directory",
    )
    parser.add_argument(
        "--run-as-non-root",
        choices=["enforce", "warn"],
        default="enforce",
        help="as root: refuse runAsNonRoot pods whose image runs as root (enforce), or warn and start them",
    )
    parser.add_argument(
        "--allow-image",
        dest="allow_images",
        action="append",
        default=[],
        metavar="PATTERN",
        help="allow-list an image (fnmatch glob, repeatable); any other image then fails to pull as one the "
        "registry does not have (ErrImagePull, then ImagePullBackOff)",
    )
    parser.add_argument(
        "--image-rules",
        type=Path,
        default=None,
        metavar="FILE",
        help='image rules as a JSON list: [{"pattern": "ghcr.io/acme/*", "allow": true, "user": 65532}, '
        '{"pattern": "*", "allow": false, "missing": true}], first match wins (before --allow-image)',
    )


def options_from(args: argparse.Namespace) -> ServeOptions:
    return ServeOptions(
        state_dir=args.state_dir.resolve(),
        port=args.port,
        cpu=args.cpu,
        memory=args.memory,
        gpus=args.gpus,
        gpu_quota=args.gpu_quota,
        tls=args.tls,
        deny_host_path=args.deny_host_path,
        run_as_non_root=args.run_as_non_root,
        image_rules=args.image_rules.resolve() if args.image_rules is not None else None,
        allow_images=tuple(args.allow_images),
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m airflow_k8s_ml.testbed.local_cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_arguments(sub.add_parser("serve", help="run the local cluster in the foreground"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve_forever(options_from(args))


if __name__ == "__main__":
    main()
