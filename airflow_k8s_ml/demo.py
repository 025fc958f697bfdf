"""``airflow-k8s-ml demo`` (``make demo``): the nightly DAG end to end on one machine.

Starts the embedded local cluster and the embedded S3 endpoint in this process, seeds a base model and
input batches, runs ``airflow dags test nightly_finetune`` against them (connections are the only thing
that points at the embedded services), prints a summary, draws the training curve, and stops everything
it started. Nothing here is special-cased in the DAG or the operators.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DAG_ID = "nightly_finetune"
NAMESPACE = "ml"
BUCKET = "ml-models"


@dataclass
class Services:
    kubeconfig: Path
    s3_endpoint: str
    s3_env: dict[str, str]
    cluster: Any
    s3: Any


@dataclass
class Outcome:
    state: str
    wall_seconds: float
    tasks: list[dict[str, Any]] = field(default_factory=list)
    xcoms: dict[str, Any] = field(default_factory=dict)


@contextmanager
def embedded_services(state_dir: Path) -> Iterator[Services]:
    """Local cluster + local S3, both on loopback, both stopped on exit (their processes too)."""
    from airflow_k8s_ml.local_cluster.cluster import ClusterThread
    from airflow_k8s_ml.local_cluster.settings import ClusterSettings, NodeCapacity
    from airflow_k8s_ml.local_s3 import LocalS3

    settings = ClusterSettings(state_dir=state_dir / "cluster", capacity=NodeCapacity(cpu="4", memory="16Gi"))
    with LocalS3("127.0.0.1", buckets=(BUCKET,)) as s3, ClusterThread(settings) as cluster:
        yield Services(cluster.kubeconfig_path, s3.endpoint_url, s3.credentials.env(), cluster, s3)


def airflow_environment(home: Path, services: Services) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_"))}
    creds = services.s3_env
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
                {
                    "conn_type": "kubernetes",
                    "extra": {"kube_config_path": str(services.kubeconfig), "namespace": NAMESPACE},
                }
            ),
            "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
                {
                    "conn_type": "aws",
                    "login": creds["AWS_ACCESS_KEY_ID"],
                    "password": creds["AWS_SECRET_ACCESS_KEY"],
                    "extra": {
                        "endpoint_url": services.s3_endpoint,
                        "region_name": creds.get("AWS_DEFAULT_REGION", "us-east-1"),
                    },
                }
            ),
        }
    )
    return env


def prepare_cluster(services: Services) -> None:
    """The namespace and the S3 credentials Secret the DAG's pods load with ``env_from`` — on a real
    cluster an admin creates the same Secret (or uses workload identity)."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(services.kubeconfig))
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    core.create_namespaced_secret(
        NAMESPACE,
        {
            "metadata": {"name": "s3-credentials"},
            "stringData": {**services.s3_env, "AWS_ENDPOINT_URL": services.s3_endpoint},
        },
    )
    api.close()


def seed(services: Services, log: Path) -> None:
    env = {**os.environ, **services.s3_env, "AWS_ENDPOINT_URL": services.s3_endpoint}
    with log.open("w") as out:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "airflow_k8s_ml.workloads.seed",
                "--base-model-uri",
                f"s3://{BUCKET}/base-model",
                "--input-uri",
                f"s3://{BUCKET}/batch-input",
            ],
            env=env,
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=300,
        )


def run_dag(env: dict[str, str], conf: dict[str, Any], log: Path) -> float:
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    started = time.monotonic()
    with log.open("w") as out:
        subprocess.run(
            [airflow, "dags", "test", DAG_ID, "--conf", json.dumps(conf)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=1800,
        )
    return time.monotonic() - started


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(output: Path) -> int:
    import signal

    from airflow_k8s_ml import demo_report

    # SIGTERM unwinds like Ctrl-C, so the context managers stop every pod process and the S3 server.
    signal.signal(signal.SIGTERM, _interrupt)
    output = output.resolve()
    output.mkdir(parents=True, exist_ok=True)
    conf = json.loads(os.environ.get("DEMO_CONF", "{}"))
    print(f"demo: starting the local cluster and the local S3 endpoint (state in {output / 'state'})")
    with embedded_services(output / "state") as services:
        prepare_cluster(services)
        print("demo: seeding a base model and input batches")
        seed(services, output / "seed.log")
        env = airflow_environment(output / "airflow-home", services)
        print(f"demo: running `airflow dags test {DAG_ID}` (log: {output / 'dag-run.log'})")
        wall = run_dag(env, conf, output / "dag-run.log")
        summary = demo_report.collect(env, DAG_ID, wall, services)
    text = demo_report.render(summary)
    (output / "summary.txt").write_text(text)
    demo_report.draw_training_curve(summary, output / "training-curve.png")
    print(text)
    print(f"demo: summary in {output / 'summary.txt'}, training curve in {output / 'training-curve.png'}")
    return 0 if summary.get("state") == "success" else 1
