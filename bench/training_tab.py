"""Training tab latency for a run with ``--checkpoints`` (100) checkpoints, through a real api-server.

What it prints: the wall time of ``GET /airflow-k8s-ml/training`` (the whole tab: auth, the task instance's
facts from the metadata DB, one S3 listing plus the manifests, the SVG and the page) for the first request
(every manifest fetched) and for ``--requests`` further ones (manifests served from the ETag cache), with
the api-server's own ``Server-Timing`` breakdown; then the checkpoint reader alone, in this process.

Method: the embedded S3 (moto, in this process) and the local cluster start here; a one-task DAG runs for
real with ``airflow dags test`` - its pod commits the checkpoints with the real writer, so the database
holds exactly what a finished run leaves - while ``airflow api-server`` (1 worker, SQLite) serves the tab.
Requests carry a real token from ``/auth/token``. moto shares this process's CPU with the client and the
machine is shared, so the figures are an upper bound for a real S3 endpoint. No assertion on time.

With ``--storage file`` the checkpoints go to a local directory instead: the same request without S3,
i.e. the tab's own cost (auth, DB, parsing, rendering). On moto, one listing of 200 objects costs about
300 ms and each GET about 20 ms by itself (measured on this machine), so the S3 figures are dominated by the
mock; a real S3 endpoint lists 1000 keys per request in tens of milliseconds.

    python bench/training_tab.py [--checkpoints 100] [--requests 20] [--storage s3|file] [--timeout 600]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread  # noqa: E402
from airflow_k8s_ml.testbed.local_cluster.settings import ClusterSettings  # noqa: E402
from airflow_k8s_ml.testbed.local_s3 import LocalS3  # noqa: E402

AIRFLOW = str(Path(sys.executable).parent / "airflow")
BUCKET = "bench-tab"
TRAIN = """
import os, sys
from airflow_k8s_ml.checkpoints import CheckpointWriter
writer = CheckpointWriter(os.environ["CHECKPOINT_URI"], max_workers=2)
for step in range(1, int(sys.argv[1]) + 1):
    writer.commit(step, {"model.bin": b"m" * 64}, {"train_loss": 2.0 / step, "val_loss": 2.4 / step,
                  "val_accuracy": 1 - 0.5 / step, "epoch": step, "global_step": 50 * step})
"""
DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_k8s_ml.operators import FineTuneJobOperator
with DAG("bench_tab", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    FineTuneJobOperator(task_id="train", namespace="default", image="trainer:1", args=[{n!r}], env={env!r},
                        command=["python", "-c", {train!r}], checkpoint_uri={base!r}, retries=0)
"""


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, token: str | None = None, body: dict[str, Any] | None = None) -> tuple[Any, bytes]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=60) as response:
        return response.headers, response.read()


def _healthy(url: str) -> bool:
    try:
        _get(url + "/api/v2/monitor/health")
        return True
    except (urllib.error.URLError, OSError):
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _env(home: Path, kubeconfig: Path, s3: LocalS3) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(s3.credentials.env())
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__API_AUTH__JWT_SECRET": "bench-secret",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW_CONN_AWS_DEFAULT": s3.credentials.airflow_connection(),
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
                {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
            ),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        }
    )
    return env


def _timings(headers: Any) -> str:
    return str(headers.get("Server-Timing", ""))


def run(checkpoints: int, requests: int, work: Path, storage: str) -> None:
    home = work / "airflow"
    (home / "dags").mkdir(parents=True)
    (home / "passwords.json").write_text(json.dumps({"admin": "admin"}))
    with LocalS3() as s3, ClusterThread(ClusterSettings(state_dir=work / "cluster")) as cluster:
        s3.create_bucket(BUCKET)
        base = f"s3://{BUCKET}/runs/bench" if storage == "s3" else f"file://{work}/checkpoints"
        pod_env = {**s3.credentials.env(), "AWS_ENDPOINT_URL": s3.endpoint_url}
        (home / "dags" / "bench_tab.py").write_text(
            DAG.format(train=TRAIN, n=str(checkpoints), env=pod_env, base=base)
        )
        env = _env(home, cluster.kubeconfig_path, s3)
        subprocess.run(
            [AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300, cwd=home
        )
        port = _port()
        url = f"http://127.0.0.1:{port}"
        with (work / "api.log").open("wb") as out:
            server = subprocess.Popen(
                [AIRFLOW, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                env=env,
                cwd=home,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            started = time.monotonic()
            run = subprocess.run(
                [AIRFLOW, "dags", "test", "bench_tab"],
                env=env,
                cwd=home,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if run.returncode != 0:
                raise SystemExit(f"dags test failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
            print(f"DAG run with {checkpoints} checkpoints: {time.monotonic() - started:.1f} s")
            while not _healthy(url):
                if server.poll() is not None:
                    raise SystemExit((work / "api.log").read_text()[-3000:])
                time.sleep(0.2)
            _, body = _get(url + "/auth/token", body={"username": "admin", "password": "admin"})
            token = json.loads(body)["access_token"]
            _, body = _get(url + "/api/v2/dags/bench_tab/dagRuns", token)
            run_id = json.loads(body)["dag_runs"][0]["dag_run_id"]
            query = urllib.parse.urlencode({"dag_id": "bench_tab", "run_id": run_id, "task_id": "train"})
            tab = f"{url}/airflow-k8s-ml/training?{query}"

            begin = time.perf_counter()
            headers, page = _get(tab, token)
            cold = (time.perf_counter() - begin) * 1000
            drawn = page.decode().count('class="point"')
            print(
                f"first request (cold: 1 listing + {checkpoints} manifest reads, {storage}): {cold:.0f} ms "
                f"[{_timings(headers)}], {drawn} points drawn, {len(page)} bytes"
            )
            warm, server_timing = [], ""
            for _ in range(requests):
                begin = time.perf_counter()
                headers, _ = _get(tab, token)
                warm.append((time.perf_counter() - begin) * 1000)
                server_timing = _timings(headers)
            warm.sort()
            p90 = warm[min(len(warm) - 1, int(len(warm) * 0.9))]
            print(
                f"next {requests} requests (warm: 1 listing, manifests cached): median "
                f"{statistics.median(warm):.0f} ms, p90 {p90:.0f} ms, max {warm[-1]:.0f} ms "
                f"[last: {server_timing}]"
            )
        finally:
            _stop(server)
        _reader_alone(base, s3)
        if base.startswith("s3://"):
            _storage_floor(base, s3)


def _storage_floor(base: str, s3: LocalS3) -> None:
    """What the S3 endpoint alone costs for the same work: the listing, and the manifest GETs (10 threads)."""
    from concurrent.futures import ThreadPoolExecutor

    client = s3.client()
    bucket, _, prefix = base.removeprefix("s3://").partition("/")
    lists = []
    for _ in range(10):
        begin = time.perf_counter()
        keys = [
            obj["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
            for obj in page.get("Contents", [])
        ]
        lists.append((time.perf_counter() - begin) * 1000)
    manifests = [key for key in keys if key.endswith("/MANIFEST.json")]
    begin = time.perf_counter()
    with ThreadPoolExecutor(10) as pool:
        list(pool.map(lambda key: client.get_object(Bucket=bucket, Key=key)["Body"].read(), manifests))
    gets = (time.perf_counter() - begin) * 1000
    print(
        f"storage floor (the endpoint alone): listing {len(keys)} objects median "
        f"{statistics.median(lists):.0f} ms, {len(manifests)} manifest GETs in 10 threads {gets:.0f} ms"
    )


def _reader_alone(base: str, s3: LocalS3) -> None:
    """The checkpoint reader without HTTP, auth or DB: where the tab's time goes."""
    from airflow_k8s_ml.ui.history import HistoryReader

    client = s3.client() if base.startswith("s3://") else None
    reader = HistoryReader(s3_client=lambda conn_id: client)
    cold = reader.read(base)
    warm = [reader.read(base).seconds * 1000 for _ in range(10)]
    print(
        f"reader alone: cold {cold.seconds * 1000:.0f} ms ({cold.manifests_fetched} GETs), "
        f"warm median {statistics.median(warm):.0f} ms ({len(cold.complete)} complete)"
    )
    reader.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=100)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--storage", choices=("s3", "file"), default="s3")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("bench timed out")))
    signal.alarm(int(args.timeout))
    with tempfile.TemporaryDirectory(prefix="bench-tab-") as work:
        run(args.checkpoints, args.requests, Path(work), args.storage)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
