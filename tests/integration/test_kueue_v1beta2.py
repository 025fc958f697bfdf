"""Kueue's v1beta2 (the storage version since Kueue 0.16) and v1beta1 (deprecated) on the local cluster, and
the operators against a cluster that serves v1beta1 alone (a Kueue < 0.16).

- Kueue's current quick start (site/static/examples/admin/single-clusterqueue-setup.yaml and
  site/static/examples/jobs/sample-job.yaml, verbatim below) applies unchanged with kubectl; the sample Job is
  admitted and its Workload reads ``Admitted=True`` as v1beta2; the v1beta2 visibility endpoint answers 200.
- A v1beta1 request gets the CRDs' deprecation warning, and renamed fields convert both ways.
- With ``ClusterSettings.kueue_v1beta2=False`` the v1beta2 groups are absent (404, not in discovery) and
  a queued operator still waits with Kueue's reason and queue position, then runs: it spoke v1beta1.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.settings import NodeCapacity

from ..cluster_fixtures import fast_settings, use_cluster, wait_for
from .deploy_helpers import kubectl, raw_request
from .kueue_helpers import GROUP, condition, make_queues, set_gpu_quota
from .training_helpers import finetune, make_context, run_task, task_log

DEPRECATED = '299 - "This version is deprecated. Use v1beta2 instead."'

#: kubernetes-sigs/kueue site/static/examples/admin/single-clusterqueue-setup.yaml, as Kueue's docs give it.
QUICK_START = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: "default-flavor"
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: "default"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"
"""

#: kubernetes-sigs/kueue site/static/examples/jobs/sample-job.yaml.
SAMPLE_JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 3
  completions: 3
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        command: [ "/bin/sh" ]
        args: [ "-c", "sleep 60" ]
        resources:
          requests:
            cpu: "1"
            memory: "200Mi"
      restartPolicy: Never
"""

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def v1beta1_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterThread]:
    """A cluster playing Kueue < 0.16: kueue.x-k8s.io and its visibility API at v1beta1 only."""
    settings = fast_settings(
        tmp_path_factory.mktemp("kueue-v1beta1"), capacity=NodeCapacity(gpus=2), kueue_v1beta2=False
    )
    with ClusterThread(settings) as running:
        yield running


@needs_kubectl
def test_kueue_quick_start_applies_unchanged_and_its_sample_job_is_admitted_as_v1beta2(
    fresh_cluster: ClusterThread, tmp_path: Path
) -> None:
    setup, job = tmp_path / "single-clusterqueue-setup.yaml", tmp_path / "sample-job.yaml"
    setup.write_text(QUICK_START)
    job.write_text(SAMPLE_JOB)
    applied = kubectl(fresh_cluster, "apply", "-f", str(setup))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.split("\n")[:3] == [
        "resourceflavor.kueue.x-k8s.io/default-flavor created",
        "clusterqueue.kueue.x-k8s.io/cluster-queue created",
        "localqueue.kueue.x-k8s.io/user-queue created",
    ]
    assert "deprecated" not in applied.stderr
    created = kubectl(fresh_cluster, "create", "-f", str(job), "-o", "name")
    assert created.returncode == 0, created.stderr
    job_name = created.stdout.strip().removeprefix("job.batch/")

    def workload() -> dict[str, Any] | None:
        listed = kubectl(
            fresh_cluster, "get", "workloads.v1beta2.kueue.x-k8s.io", "-n", "default", "-o", "json"
        )
        items = json.loads(listed.stdout)["items"] if listed.returncode == 0 else []
        mine = [w for w in items if w["metadata"]["ownerReferences"][0]["name"] == job_name]
        return mine[0] if mine else None

    admitted = wait_for(
        workload, lambda w: condition(w, "Admitted").get("status") == "True", what="the sample job admitted"
    )
    assert admitted["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert admitted["status"]["admission"]["clusterQueue"] == "cluster-queue"
    suspended = kubectl(
        fresh_cluster, "get", "job", job_name, "-n", "default", "-o", "jsonpath={.spec.suspend}"
    )
    assert suspended.stdout == "false"

    raw = kubectl(
        fresh_cluster,
        "get",
        "--raw",
        "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/user-queue/pendingworkloads",
    )
    assert raw.returncode == 0, raw.stderr  # kubectl exits 0 only on a 2xx
    assert json.loads(raw.stdout)["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    kubectl(fresh_cluster, "delete", "job", job_name, "-n", "default", "--wait=false")


def test_v1beta1_is_deprecated_and_converted_both_ways(fresh_cluster: ClusterThread) -> None:
    """A v1beta1 ClusterQueue's ``cohort`` and ``admissionChecks`` read back as v1beta2's ``cohortName`` and
    ``admissionChecksStrategy``; a v1beta2 Workload's ``priorityClassRef`` reads as v1beta1's source and
    name; every v1beta1 answer carries the CRDs' warning, no v1beta2 one does."""
    cq = {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "old-style"},
        "spec": {
            "cohort": "team",
            "admissionChecks": ["check-a"],
            "flavorFungibility": {"whenCanBorrow": "Borrow"},
            "resourceGroups": [],
        },
    }
    status, headers, body = raw_request(
        fresh_cluster,
        "POST",
        f"/apis/{GROUP}/v1beta1/clusterqueues?fieldValidation=Strict",
        json.dumps(cq).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 201, body
    assert headers.get("Warning") == DEPRECATED
    assert json.loads(body)["spec"]["cohort"] == "team"
    status, headers, body = raw_request(
        fresh_cluster, "GET", f"/apis/{GROUP}/v1beta2/clusterqueues/old-style"
    )
    assert status == 200 and "Warning" not in headers
    spec = json.loads(body)["spec"]
    assert spec["cohortName"] == "team" and "cohort" not in spec
    assert spec["admissionChecksStrategy"] == {"admissionChecks": [{"name": "check-a"}]}
    assert spec["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"

    wl = {
        "apiVersion": f"{GROUP}/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "queueName": "q",
            "priorityClassRef": {"group": GROUP, "kind": "WorkloadPriorityClass", "name": "high"},
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }
    status, _, body = raw_request(
        fresh_cluster,
        "POST",
        f"/apis/{GROUP}/v1beta2/namespaces/default/workloads?fieldValidation=Strict",
        json.dumps(wl).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 201, body
    status, headers, body = raw_request(
        fresh_cluster, "GET", f"/apis/{GROUP}/v1beta1/namespaces/default/workloads/w"
    )
    assert status == 200 and headers.get("Warning") == DEPRECATED
    old = json.loads(body)
    assert old["apiVersion"] == f"{GROUP}/v1beta1"
    assert old["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"
    assert old["spec"]["priorityClassName"] == "high" and "priorityClassRef" not in old["spec"]
    # Strict validation knows each version's own fields.
    status, _, body = raw_request(
        fresh_cluster,
        "POST",
        f"/apis/{GROUP}/v1beta2/clusterqueues?fieldValidation=Strict",
        json.dumps({**cq, "apiVersion": f"{GROUP}/v1beta2", "metadata": {"name": "bad"}}).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 400
    assert 'unknown field "spec.cohort"' in json.loads(body)["message"]


def test_discovery_prefers_v1beta2(fresh_cluster: ClusterThread) -> None:
    for group in (GROUP, f"visibility.{GROUP}"):
        status, _, body = raw_request(fresh_cluster, "GET", f"/apis/{group}")
        assert status == 200
        doc = json.loads(body)
        assert [v["version"] for v in doc["versions"]] == ["v1beta2", "v1beta1"]
        assert doc["preferredVersion"]["version"] == "v1beta2"


def test_a_v1beta1_only_cluster_serves_no_v1beta2_and_warns_of_nothing(v1beta1_only: ClusterThread) -> None:
    status, _, body = raw_request(v1beta1_only, "GET", f"/apis/{GROUP}")
    assert status == 200
    assert [v["version"] for v in json.loads(body)["versions"]] == ["v1beta1"]
    for path in (
        f"/apis/{GROUP}/v1beta2",
        f"/apis/{GROUP}/v1beta2/clusterqueues",
        f"/apis/visibility.{GROUP}/v1beta2",
    ):
        assert raw_request(v1beta1_only, "GET", path)[0] == 404
    status, headers, _ = raw_request(v1beta1_only, "GET", f"/apis/{GROUP}/v1beta1/clusterqueues")
    assert status == 200 and "Warning" not in headers


def test_operators_speak_v1beta1_to_a_kueue_older_than_0_16(
    v1beta1_only: ClusterThread, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    """A queued task on a v1beta1-only Kueue: the client picks v1beta1, the wait reads the Workload and the
    visibility API there (the waiting line has Kueue's reason and the position), then the job runs."""
    from kubernetes import config

    from airflow_k8s_ml.kube.sync_client import KubeClient

    use_cluster(monkeypatch, v1beta1_only.kubeconfig_path)
    api = config.new_client_from_config(str(v1beta1_only.kubeconfig_path))
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    namespace = "old-kueue"
    core.create_namespace({"metadata": {"name": namespace}})
    assert KubeClient().kueue_version() == "v1beta1"
    cq, lq = make_queues(custom, namespace, gpus=0, version="v1beta1")
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            op = finetune("old", namespace, "print('ran on v1beta1')", gpus=1, queue_name=lq)
            outcome["result"] = run_task(op, make_context("old"))
        except BaseException as exc:
            outcome["error"] = exc

    task = threading.Thread(target=run, daemon=True)
    task.start()
    logged: list[str] = []

    def log() -> str:
        logged.append(task_log(capsys))
        return "".join(logged)

    waiting = wait_for(log, lambda text: "waiting for admission in queue" in text, what="the waiting line")
    assert f"in queue {lq}, position 1 (next in line) [Pending]" in waiting
    set_gpu_quota(custom, cq, 1, version="v1beta1")
    task.join(90)
    assert not task.is_alive(), "the task did not finish"
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"]["state"]["phase"] == "succeeded"
    assert "ran on v1beta1" in log()
    assert outcome["result"]["admitted_at"]  # Kueue's admission, read from the v1beta1 Workload
    api.close()
