"""The Training tab, the approved-checkpoint page and the extra links through a real ``airflow api-server``.

One module fixture: a DAG whose training tasks run for real on the local cluster (``airflow dags test``,
deferrable, their pods commit checkpoints with the real writer - to the embedded S3 and to file://), while an
``airflow api-server`` serves the same metadata DB with the plugin loaded from its entry point. The third
training task commits three checkpoints, leaves a fourth half-written and waits, so the run is observed in
progress; the test releases it at the end. Every request is real HTTP with a real token from ``/auth/token``.

Timing: the fixture costs about half a minute (migration, api-server start-up and the DAG run overlap).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_s3 import LocalS3

from ..airflow_env import AIRFLOW, airflow_env, migrate
from .ui_auth_manager import OUTSIDER

ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "ui_training"
NAMESPACE = "ui-tab"
DASHBOARD = "https://dash.example/ns/{namespace}/workload/{name}"

#: The pods' training: N checkpoints with metrics that are a function of the step, then ok / fail / wait.
TRAIN = """
import os, sys, time
from airflow_k8s_ml.checkpoints import CheckpointWriter
steps, mode = int(sys.argv[1]), sys.argv[2]
base = os.environ["CHECKPOINT_URI"]
writer = CheckpointWriter(base)
for step in range(1, steps + 1):
    writer.commit(step, {"model.bin": b"m" * step}, {"train_loss": 2.0 / step, "val_loss": 2.5 / step,
                  "val_accuracy": 0.6 + step / 20, "epoch": step})
if mode != "ok":  # a commit that never published its manifest
    os.makedirs(base[len("file://"):] + f"/step-{steps + 1}", exist_ok=True)
    open(base[len("file://"):] + f"/step-{steps + 1}/model.bin", "wb").write(b"partial")
if mode == "fail":
    sys.exit(3)
while mode == "wait" and not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
"""

DAG = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_k8s_ml.operators import CheckpointCheckOperator, FineTuneJobOperator

COMMON = dict(namespace={namespace!r}, image="trainer:1", command=["python", "-c", {train!r}], retries=0)
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    ok = FineTuneJobOperator(task_id="train_ok", args=["4", "ok"], env={s3_env!r},
                             checkpoint_uri={s3_base!r} + "/{{{{ ts_nodash }}}}", **COMMON)
    gate = CheckpointCheckOperator(task_id="gate", base_uri={s3_base!r} + "/{{{{ ts_nodash }}}}",
                                   metric_rules={{"val_accuracy": ">= 0.7"}})
    fails = FineTuneJobOperator(task_id="train_fails", args=["2", "fail"],
                                checkpoint_uri={file_base!r} + "/fails", **COMMON)
    running = FineTuneJobOperator(task_id="train_running", args=["3", "wait", {sentinel!r}],
                                  checkpoint_uri={file_base!r} + "/running", trigger_rule="all_done",
                                  run_timeout=timedelta(hours=1), deadline=timedelta(hours=2), **COMMON)
    ok >> gate >> running
    fails >> running
"""


def metrics(step: int) -> dict[str, float]:
    return {"train_loss": 2.0 / step, "val_loss": 2.5 / step, "val_accuracy": 0.6 + step / 20, "epoch": step}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(condition: Any, what: str, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"{what}: process exited {proc.returncode}\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout} s\n{log.read_text()[-4000:]}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@dataclass
class Server:
    url: str
    tokens: dict[str, str]
    run_id: str
    file_base: Path
    s3_prefix: str
    local_s3: LocalS3
    bucket: str

    def get(self, path: str, user: str | None = "admin", **query: Any) -> tuple[int, Any, bytes]:
        """(status, headers - case-insensitive, body)."""
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers, exc.read()

    def tab(self, task_id: str, path: str = "/airflow-k8s-ml/training/data.json", user: str = "admin") -> Any:
        status, _, body = self.get(
            path, user, dag_id=DAG_ID, run_id=self.run_id, task_id=task_id, map_index=-1
        )
        assert status == 200, body[:2000]
        return json.loads(body) if path.endswith(".json") else body.decode()


def _token(url: str, user: str, password: str) -> str:
    body = json.dumps({"username": user, "password": password}).encode()
    request = urllib.request.Request(url + "/auth/token", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(json.loads(response.read())["access_token"])


def _ti_states(url: str, token: str, run_id: str) -> dict[str, str]:
    path = f"/api/v2/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances"
    request = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return {ti["task_id"]: ti["state"] for ti in json.loads(response.read())["task_instances"]}


def _run_id(url: str, token: str) -> str | None:
    request = urllib.request.Request(
        url + f"/api/v2/dags/{DAG_ID}/dagRuns", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            runs = json.loads(response.read())["dag_runs"]
    except urllib.error.HTTPError:
        return None  # the DAG is not in the DB yet
    return runs[0]["dag_run_id"] if runs else None


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, cluster: ClusterThread, local_s3: LocalS3
) -> Iterator[Server]:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
    api.close()

    home = tmp_path_factory.mktemp("ui-airflow")
    dags, file_base, sentinel = home / "dags", home / "checkpoints", home / "release"
    dags.mkdir()
    bucket = "ui-tab"
    local_s3.create_bucket(bucket)
    s3_env = {**local_s3.credentials.env(), "AWS_ENDPOINT_URL": local_s3.endpoint_url}
    (dags / "ui_training.py").write_text(
        DAG.format(
            namespace=NAMESPACE,
            train=TRAIN,
            dag_id=DAG_ID,
            s3_base=f"s3://{bucket}/runs",
            s3_env=s3_env,
            file_base=f"file://{file_base}",
            sentinel=str(sentinel),
        )
    )
    (home / "passwords.json").write_text(json.dumps({"admin": "admin-pw", OUTSIDER: "outsider-pw"}))
    env = airflow_env(
        home,
        dags,
        str(cluster.kubeconfig_path),
        extra={
            "AIRFLOW_CONN_AWS_DEFAULT": local_s3.credentials.airflow_connection(),
            "AIRFLOW__AIRFLOW_K8S_ML__DASHBOARD_URL_TEMPLATE": DASHBOARD,
            "AIRFLOW__CORE__AUTH_MANAGER": "ui_auth_manager.DagDenyingAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"admin:admin,{OUTSIDER}:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__API_AUTH__JWT_SECRET": "ui-tab-test-secret",
            # Only the auth manager's folder: the repository root holds a setuptools *.egg-info that
            # would list the plugin's entry point a second time.
            "PYTHONPATH": str(ROOT / "tests" / "integration"),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        },
    )
    env.update(local_s3.credentials.env())
    migrate(env)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    api_log, run_log = home / "api-server.log", home / "dags-test.log"
    with api_log.open("wb") as api_out, run_log.open("wb") as run_out:
        # cwd outside the repository: its setuptools *.egg-info would list the plugin's entry point twice.
        api_server = subprocess.Popen(
            [AIRFLOW, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            env=env,
            cwd=home,
            stdout=api_out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        dag_run = subprocess.Popen(
            [AIRFLOW, "dags", "test", DAG_ID],
            env=env,
            cwd=home,
            stdout=run_out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(url + "/api/v2/monitor/health", timeout=2):
                    return True
            except (urllib.error.URLError, OSError):
                return False

        _wait(healthy, "api-server health", 120, api_server, api_log)
        tokens = {"admin": _token(url, "admin", "admin-pw"), OUTSIDER: _token(url, OUTSIDER, "outsider-pw")}
        running = file_base / "running"
        _wait(
            lambda: (running / "step-3" / "MANIFEST.json").exists() and (running / "step-4").exists(),
            "train_running's third checkpoint",
            240,
            dag_run,
            run_log,
        )
        run_id = _run_id(url, tokens["admin"])
        assert run_id is not None
        yield Server(url, tokens, run_id, file_base, "runs", local_s3, bucket)
    finally:
        sentinel.write_text("go")
        _stop(dag_run)
        _stop(api_server)


def _s3_manifests(server: Server) -> dict[int, dict[str, float]]:
    """The metrics of every MANIFEST.json under train_ok's base, read straight from S3."""
    s3 = server.local_s3.client()
    found = {}
    for obj in s3.list_objects_v2(Bucket=server.bucket, Prefix=server.s3_prefix + "/")["Contents"]:
        if obj["Key"].endswith("/MANIFEST.json"):
            manifest = json.loads(s3.get_object(Bucket=server.bucket, Key=obj["Key"])["Body"].read())
            found[manifest["step"]] = manifest["metrics"]
    return found


def test_the_api_server_lists_the_tab_for_task_instances(server: Server) -> None:
    status, _, body = server.get("/api/v2/plugins")
    assert status == 200
    (plugin,) = [p for p in json.loads(body)["plugins"] if p["name"] == "airflow_k8s_ml"]
    (view,) = plugin["external_views"]
    assert view["destination"] == "task_instance" and view["href"].startswith("/airflow-k8s-ml/training?")
    status, _, body = server.get("/api/v2/plugins/importErrors")
    assert status == 200 and json.loads(body)["import_errors"] == []


def test_finished_run_svg_has_one_point_per_committed_checkpoint(server: Server) -> None:
    manifests = _s3_manifests(server)
    assert sorted(manifests) == [1, 2, 3, 4] and manifests[4] == metrics(4)
    status, headers, body = server.get(
        "/airflow-k8s-ml/training/chart.svg", dag_id=DAG_ID, run_id=server.run_id, task_id="train_ok"
    )
    assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")
    points = re.findall(r'data-metric="([^"]+)" data-step="(\d+)"\s+data-value="([^"]+)"', body.decode())
    drawn = {(name, int(step)): float(value) for name, step, value in points}
    expected = {(name, step): m[name] for step, m in manifests.items() for name in m if name != "epoch"}
    assert drawn == expected
    assert "facts;dur=" in headers["Server-Timing"]
    data = server.tab("train_ok")
    assert data["progress"] == "finished" and data["latest"]["step"] == 4
    assert data["workload"]["kind"] == "Job" and data["workload"]["namespace"] == NAMESPACE
    assert data["workload_state"]["phase"] == "succeeded" and data["ignored"] == []


def test_in_progress_run_ignores_the_half_written_checkpoint(server: Server) -> None:
    data = server.tab("train_running")
    assert data["progress"] == "in progress" and data["ti_state"] != "success"
    assert [p["step"] for p in data["checkpoints"]] == [1, 2, 3]
    assert [p["step"] for p in data["ignored"]] == [4] and "MANIFEST.json" in data["ignored"][0]["problem"]
    assert data["latest"]["metrics"] == metrics(3)
    assert data["workload"]["name"] and data["workload"]["namespace"] == NAMESPACE
    # Read live from the cluster through the trigger's connection: the pod trains, the run budget runs down.
    assert data["state_source"] == "live (Kubernetes)" and data["live_phase"] == "running"
    assert data["workload_state"]["phase"] == "running"
    left = {d["name"]: (d["budget_seconds"], d["left_seconds"]) for d in data["deadlines"]}
    # the two set on the task, and the default start-up and admission budgets (docs/waiting.md)
    assert set(left) == {"run_timeout", "deadline", "admission_timeout", "startup_timeout"}
    assert left["admission_timeout"][0] == 6 * 3600 and left["startup_timeout"][0] == 1800
    assert left["run_timeout"][0] == 3600 and left["deadline"][0] == 7200
    assert 3000 < left["run_timeout"][1] <= 3600 and 6600 < left["deadline"][1] <= 7200
    page = server.tab("train_running", "/airflow-k8s-ml/training")
    assert '<meta http-equiv="refresh"' in page and page.count('class="point"') == 3 * 3


def test_failed_run_shows_where_training_stopped(server: Server) -> None:
    data = server.tab("train_fails")
    assert data["progress"] == "failed"
    assert [p["step"] for p in data["checkpoints"]] == [1, 2]
    stopped = data["stopped"]
    assert (
        stopped.startswith("training stopped after step 2 (epoch 2)") and "step 3 never completed" in stopped
    )
    assert data["workload_state"]["phase"] == "failed" and data["state_source"].startswith("recorded outcome")
    page = server.tab("train_fails", "/airflow-k8s-ml/training")
    assert 'data-marker="stopped" data-step="2"' in page and "training stopped after step 2" in page


def test_a_task_that_does_not_train_says_so(server: Server) -> None:
    assert "not a training task" in server.tab("gate", "/airflow-k8s-ml/training")


def test_without_a_permitted_user_the_tab_answers_401_or_403(server: Server) -> None:
    query = {"dag_id": DAG_ID, "run_id": server.run_id, "task_id": "train_ok"}
    for path in (
        "/airflow-k8s-ml/training",
        "/airflow-k8s-ml/training/chart.svg",
        "/airflow-k8s-ml/checkpoint",
    ):
        assert server.get(path, None, **query)[0] == 401
        assert server.get(path, OUTSIDER, **query)[0] == 403
    # The same user is refused the same task instance by Airflow's own API: one rule, one auth manager.
    ti_path = (
        f"/api/v2/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(server.run_id, safe='')}/taskInstances/train_ok"
    )
    assert server.get(ti_path, OUTSIDER)[0] == 403 and server.get(ti_path)[0] == 200


def _links(server: Server, task_id: str) -> dict[str, str | None]:
    run = urllib.parse.quote(server.run_id, safe="")
    path = f"/api/v2/dags/{DAG_ID}/dagRuns/{run}/taskInstances/{task_id}/links"
    status, _, body = server.get(path)
    assert status == 200, body[:1000]
    return json.loads(body)["extra_links"]  # type: ignore[no-any-return]


def test_extra_links_resolve_from_what_the_tasks_pushed(server: Server) -> None:
    data = server.tab("train_ok")
    workload = data["workload"]
    assert _links(server, "train_ok") == {
        "Cluster dashboard": f"https://dash.example/ns/{NAMESPACE}/workload/{workload['name']}"
    }
    approved = _links(server, "gate")["Approved checkpoint"]
    assert approved is not None and approved.startswith("/airflow-k8s-ml/checkpoint?")
    status, _, body = server.get(approved)
    assert status == 200
    page = body.decode()
    assert "step-4/" in page and "val_accuracy=0.8" in page


def test_every_answer_carries_a_no_script_policy_and_nosniff(server: Server) -> None:
    """Airflow's iframe sandbox lets scripts run: the tab's own headers forbid them."""
    from airflow_k8s_ml.ui.app import SECURITY_HEADERS

    query = {"dag_id": DAG_ID, "run_id": server.run_id, "task_id": "train_ok"}
    for path in (
        "/airflow-k8s-ml/training",
        "/airflow-k8s-ml/training/chart.svg",
        "/airflow-k8s-ml/training/data.json",
    ):
        status, headers, _ = server.get(path, **query)
        assert status == 200
        assert headers["X-Content-Type-Options"] == "nosniff"
        policy = headers["Content-Security-Policy"]
        assert policy == SECURITY_HEADERS["Content-Security-Policy"] and "script-src" not in policy
        assert "default-src 'none'" in policy
    status, headers, _ = server.get("/airflow-k8s-ml/training", user=None, **query)
    assert status in (401, 403) and headers["X-Content-Type-Options"] == "nosniff"
    status, _, _ = server.get("/airflow-k8s-ml/openapi.json", user=None)
    assert status == 404
