"""``airflow-k8s-ml standalone``: the Airflow UI over the embedded cluster and S3, in one command.

Starts the local cluster and the local S3 endpoint in this process, creates the namespace and the S3
Secret, seeds the base model and input batches, then Airflow's api-server, scheduler, dag-processor and
triggerer (:mod:`.airflow_stack`) with the connections pointing at them; with ``--ha``, Airflow as a team
runs it in production: PostgreSQL, Redis, the CeleryExecutor with two workers, two schedulers and two
triggerers. It prints the UI's URL and the
login on every start (the password is kept, mode 0600, in the Airflow home), and stops every process tree
it started on Ctrl-C or SIGTERM. The same pieces as ``make demo``; docs/real-cluster.md shows them one by
one for people who want to run them by hand.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_k8s_ml.testbed import demo

if TYPE_CHECKING:
    from airflow_k8s_ml.testbed.airflow_stack import AirflowStack

DEFAULT_HOME = Path.home() / ".airflow-k8s-ml" / "standalone"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def banner(stack: AirflowStack, services: demo.Services) -> str:
    ha = int(stack.settings.ha)
    return "\n".join(
        [
            "",
            "airflow-k8s-ml standalone is ready",
            f"  Airflow UI      {stack.url}   login: admin / {stack.password}",
            f"  DAGs folder     {stack.settings.dags_folder}",
            f"  kubectl         export KUBECONFIG={services.kubeconfig}",
            f"  S3 endpoint     {services.s3_endpoint} (bucket {demo.BUCKET})",
            f"  logs            {stack.home / 'logs'}",
            *([f"  executor        CeleryExecutor on Redis, PostgreSQL: {', '.join(stack.procs)}"] * ha),
            "  stop            Ctrl-C",
            "",
        ]
    )


def main(home: Path, port: int, dags_folder: Path | None = None, *, ha: bool = False) -> int:
    from airflow_k8s_ml.testbed.airflow_stack import AirflowStack, StackSettings, port_is_free

    home = home.expanduser().resolve()
    if port and not port_is_free(port):
        print(f"standalone: port {port} on 127.0.0.1 is in use; pick another with --port", file=sys.stderr)
        return 2
    if ha:
        from airflow_k8s_ml.testbed.backing_services import missing_backends

        why = missing_backends()
        if why:
            print(f"standalone --ha: needs {why}", file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        print(f"standalone: starting the local cluster and the local S3 endpoint (state in {home})")
        # The repository's DAGs declare their images (demo.IMAGES); a folder of the user's runs any image.
        images = demo.IMAGES if dags_folder is None else None
        with demo.embedded_services(home / "state", images=images) as services:
            demo.prepare_cluster(services)
            print("standalone: seeding a base model and input batches")
            demo.seed(services, home / "seed.log")
            settings = StackSettings(
                home=home / "airflow-home",
                dags_folder=(dags_folder or demo.REPO_ROOT / "dags").resolve(),
                env=demo.connections(services),
                port=port,
                ha=ha,
            )
            stack = AirflowStack(settings)
            backends = "PostgreSQL, Redis, " if ha else ""
            print(f"standalone: starting Airflow ({backends}{', '.join(settings.fleet)}) on {stack.url}")
            with stack:
                print(banner(stack, services), flush=True)
                while True:
                    for name, proc in stack.procs.items():
                        if proc.poll() is not None:
                            print(
                                f"standalone: airflow {name} exited ({proc.returncode}):\n"
                                f"{stack.log_tail(name)}",
                                file=sys.stderr,
                            )
                            return 1
                    time.sleep(1.0)
    except KeyboardInterrupt:
        print("standalone: stopping", file=sys.stderr)
    return 0
