"""``airflow-k8s-ml demo`` (``make demo``): the nightly DAG end to end on one machine.

Starts the embedded local cluster and the embedded S3 endpoint in this process, seeds a base model and
input batches, starts Airflow's real components (:mod:`.airflow_stack`: api-server, scheduler,
dag-processor, triggerer; LocalExecutor), triggers ``nightly_finetune`` through the REST API with no logical
date, waits for it, prints a summary read back through the REST API, draws the training curve, and stops
everything it started (whole process trees). Connections are the only thing that points the DAG at the
embedded services; nothing is special-cased in the DAG or the operators.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_k8s_ml.testbed.airflow_stack import AirflowStack, StackSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "nightly_finetune"
#: The images the demo's DAGs use (``dags/``: the nightly DAG, ``make demo-queue``'s), and the only ones its
#: cluster has: any other answers as a registry answers a typo (``ErrImagePull``, then
#: ``ImagePullBackOff``), so a typo'd image in the DAG fails the demo as it would fail on a cluster.
#: ``tests/unit/test_demo_images.py`` holds this list to the images the DAGs' tasks name.
IMAGES = ("ghcr.io/airflow-k8s-ml/workloads:0.1.0",)
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


@dataclass(frozen=True)
class ClusterShape:
    """What the demo's cluster advertises: ``gpus`` fake GPUs on its node and, with ``gpu_quota``, Kueue's
    default queue (``default-flavor``, ``cluster-queue`` with that many ``nvidia.com/gpu``, LocalQueue
    ``user-queue``) - what ``local up --gpus N --gpu-quota N`` gives - plus ``user-queue`` in the DAG's
    namespace (:func:`prepare_cluster`)."""

    gpus: int = 0
    gpu_quota: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClusterShape:
        """``DEMO_GPUS`` and ``DEMO_GPU_QUOTA`` (``make demo-queue`` sets both)."""
        quota = env.get("DEMO_GPU_QUOTA")
        return cls(gpus=int(env.get("DEMO_GPUS") or 0), gpu_quota=int(quota) if quota else None)


@contextmanager
def embedded_services(
    state_dir: Path, shape: ClusterShape | None = None, images: tuple[str, ...] | None = IMAGES
) -> Iterator[Services]:
    """Local cluster + local S3, both on loopback, both stopped on exit (their processes too). The
    cluster has ``images`` only (an allow-list: :data:`IMAGES` unless the caller declares its own); None:
    every image runs (someone else's DAGs, whose images the test bed cannot know)."""
    from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
    from airflow_k8s_ml.testbed.local_cluster.settings import (
        ClusterSettings,
        NodeCapacity,
        QueueQuota,
        allow_list,
    )
    from airflow_k8s_ml.testbed.local_s3 import LocalS3

    # Each demo starts from scratch: the cluster keeps its objects in its state dir across restarts, but
    # the demo's S3 lives in memory, so an earlier run's cluster state would point at data that is gone.
    shutil.rmtree(state_dir / "cluster", ignore_errors=True)
    # The DAG's pods keep the operators' runAsNonRoot default, and its "image" is this machine's Python:
    # run as root, the cluster warns about them instead of refusing (docs/local-cluster.md, security).
    shape = shape or ClusterShape()
    quota = None
    if shape.gpu_quota is not None:
        quota = QueueQuota(gpus=shape.gpu_quota, cpu="4", memory="16Gi")  # its LocalQueue: prepare_cluster
    settings = ClusterSettings(
        state_dir=state_dir / "cluster",
        capacity=NodeCapacity(cpu="4", memory="16Gi", gpus=shape.gpus),
        run_as_non_root="warn",
        queue_quota=quota,
        images=allow_list(images) if images is not None else [],
    )
    with LocalS3("127.0.0.1", buckets=(BUCKET,)) as s3, ClusterThread(settings) as cluster:
        yield Services(cluster.kubeconfig_path, s3.endpoint_url, s3.credentials.env(), cluster, s3)


def connections(services: Services) -> dict[str, str]:
    """The only thing that points the DAG at the embedded services: its two connections."""
    creds = services.s3_env
    return {
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


def prepare_cluster(services: Services, queued: bool = False) -> None:
    """The namespace and the S3 credentials Secret the DAG's pods load with ``env_from`` — on a real
    cluster an admin creates the same Secret (or uses workload identity); ``queued``: Kueue's LocalQueue
    ``user-queue`` in it, on the default ``cluster-queue``. Idempotent: the local cluster keeps its
    objects across restarts, and the Secret is brought up to date."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api = config.new_client_from_config(config_file=str(services.kubeconfig))
    core = client.CoreV1Api(api)
    secret = {
        "metadata": {"name": "s3-credentials"},
        "stringData": {**services.s3_env, "AWS_ENDPOINT_URL": services.s3_endpoint},
    }
    try:
        try:
            core.create_namespace({"metadata": {"name": NAMESPACE}}, field_validation="Strict")
        except ApiException as exc:
            if exc.status != 409:
                raise
        try:
            core.create_namespaced_secret(NAMESPACE, secret, field_validation="Strict")
        except ApiException as exc:
            if exc.status != 409:
                raise
            core.replace_namespaced_secret("s3-credentials", NAMESPACE, secret, field_validation="Strict")
        if queued:
            queue = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "user-queue"},
                "spec": {"clusterQueue": "cluster-queue"},
            }
            try:
                client.CustomObjectsApi(api).create_namespaced_custom_object(
                    "kueue.x-k8s.io", "v1beta2", NAMESPACE, "localqueues", queue
                )
            except ApiException as exc:
                if exc.status != 409:
                    raise
    finally:
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


def stack_settings(home: Path, services: Services) -> StackSettings:
    from airflow_k8s_ml.testbed.airflow_stack import StackSettings

    return StackSettings(home=home, dags_folder=REPO_ROOT / "dags", env=connections(services))


def run_dag(stack: AirflowStack, conf: dict[str, Any], timeout: float = 1800.0) -> str:
    """Unpause, trigger through the REST API with no logical date (as the UI and CLI do), wait; the run id."""
    stack.rest.wait_dag(DAG_ID)
    stack.rest.set_paused(DAG_ID, False)
    run_id = stack.rest.trigger(DAG_ID, conf)
    stack.rest.wait_run(DAG_ID, run_id, timeout)
    return run_id


#: ``make demo-queue``'s second act: two runs of this DAG compete for the one GPU of the queue.
COMPETING_DAG_ID = "queued_gpu_training"


def compete_for_the_gpu(stack: AirflowStack) -> list[str]:
    """Trigger two runs of :data:`COMPETING_DAG_ID` at once and wait for both; per run, the task log's
    queue lines (Kueue's reason while it waits, the admission) and its outcome."""
    stack.rest.wait_dag(COMPETING_DAG_ID)
    stack.rest.set_paused(COMPETING_DAG_ID, False)
    run_ids = [stack.rest.trigger(COMPETING_DAG_ID, {}) for _ in range(2)]
    lines = []
    for run_id in run_ids:
        run = stack.rest.wait_run(COMPETING_DAG_ID, run_id, 600)
        entries = stack.rest.task_log(COMPETING_DAG_ID, run_id, "train", 1)
        queue_lines = [
            str(e.get("event"))
            for e in entries
            if "admission in queue" in str(e.get("event")) or " admitted by queue " in str(e.get("event"))
        ]
        lines.append(f"run {run_id}: {run.get('state')}")
        lines += [f"    {line}" for line in queue_lines]
    return lines


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(output: Path) -> int:
    import signal

    from airflow_k8s_ml.testbed import demo_report
    from airflow_k8s_ml.testbed.airflow_stack import AirflowStack

    # SIGTERM unwinds like Ctrl-C, so the context managers stop Airflow's process trees, every pod
    # process and the S3 server.
    signal.signal(signal.SIGTERM, _interrupt)
    output = output.resolve()
    output.mkdir(parents=True, exist_ok=True)
    conf = json.loads(os.environ.get("DEMO_CONF", "{}"))
    print(f"demo: starting the local cluster and the local S3 endpoint (state in {output / 'state'})")
    shape = ClusterShape.from_env(os.environ)
    with embedded_services(output / "state", shape) as services:
        prepare_cluster(services, queued=shape.gpu_quota is not None)
        print("demo: seeding a base model and input batches")
        seed(services, output / "seed.log")
        # A fresh Airflow home too: an earlier run's database would carry its DAG runs and schedule.
        shutil.rmtree(output / "airflow-home", ignore_errors=True)
        stack = AirflowStack(stack_settings(output / "airflow-home", services))
        print(
            f"demo: starting Airflow's api-server, scheduler, dag-processor and triggerer on {stack.url} "
            f"(LocalExecutor; logs in {stack.home / 'logs'})"
        )
        with stack:
            print(
                f"demo: triggering {DAG_ID} through the REST API (no logical date), conf {json.dumps(conf)}"
            )
            run_id = run_dag(stack, conf)
            summary = demo_report.collect(stack.rest, DAG_ID, run_id, services)
            competing = []
            if shape.gpu_quota is not None:
                print(f"demo: two runs of {COMPETING_DAG_ID} compete for the queue's {shape.gpu_quota} GPU")
                competing = compete_for_the_gpu(stack)
    text = demo_report.render(summary)
    if competing:
        text += f"\n{COMPETING_DAG_ID}: two runs, one GPU of quota\n" + "\n".join(competing) + "\n"
    (output / "summary.txt").write_text(text)
    demo_report.draw_training_curve(summary, output / "training-curve.png")
    print(text)
    print(f"demo: summary in {output / 'summary.txt'}, training curve in {output / 'training-curve.png'}")
    return 0 if summary.get("state") == "success" else 1
