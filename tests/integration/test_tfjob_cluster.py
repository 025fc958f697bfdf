"""The local cluster's TFJob controller as training-operator 1.9 behaves, through the real ``kubernetes``
client: TF_CONFIG as ``genTFConfigJSONStr`` writes it, the reference workload proving the topology, the
success policies, restart policies and cleanPodPolicy, the webhook's denials and the stored defaults."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.cluster_fixtures import python_cmd, wait_for

from . import pod_helpers
from .tfjob_helpers import condition, create, finished, get, job_body, replica


def _pods(core: Any, namespace: str, name: str) -> dict[str, Any]:
    selector = f"training.kubeflow.org/job-name={name}"
    return {p.metadata.name: p for p in core.list_namespaced_pod(namespace, label_selector=selector).items}


def _finished(custom: Any, namespace: str, name: str, timeout: float = 90) -> dict[str, Any]:
    wait_for(lambda: finished(get(custom, namespace, name)), timeout=timeout, what=f"TFJob {name} finished")
    return get(custom, namespace, name)


def _tf_config(pod: Any) -> dict[str, Any]:
    [container] = [c for c in pod.spec.containers if c.name == "tensorflow"]
    [value] = [e.value for e in container.env if e.name == "TF_CONFIG"]
    return json.loads(value)  # type: ignore[no-any-return]


def test_chief_workers_and_ps_prove_the_topology_and_succeed(custom: Any, core: Any, namespace: str) -> None:
    specs = {"Chief": replica(), "Worker": replica(replicas=2), "PS": replica()}
    create(custom, namespace, job_body("topo", specs, runPolicy={"cleanPodPolicy": "Running"}))
    job = _finished(custom, namespace, "topo")
    succeeded = condition(job, "Succeeded")
    assert succeeded is not None and succeeded["status"] == "True", job["status"]
    assert succeeded["reason"] == "TFJobSucceeded"
    assert succeeded["message"] == f"TFJob {namespace}/topo successfully completed."
    assert [c["type"] for c in job["status"]["conditions"]] == ["Created", "Running", "Succeeded"]
    assert job["status"]["conditions"][0]["message"] == "TFJob topo is created."
    # the chief heard from both workers, which dialled its address from their TF_CONFIG (the workers
    # themselves may be gone: cleanPodPolicy Running deletes those still running when the chief succeeded)
    chief = pod_helpers.read_log(core, namespace, "topo-chief-0")
    assert "task chief 0; cluster 1 chief, 1 ps, 2 worker;" in chief
    assert "hello from worker 0" in chief and "hello from worker 1" in chief and "topology complete" in chief
    # cleanPodPolicy Running stops the parameter server, which would otherwise serve forever
    wait_for(lambda: "topo-ps-0" not in _pods(core, namespace, "topo"), timeout=60, what="PS deleted")


def test_tf_config_is_training_operator_1_9s(custom: Any, core: Any, namespace: str) -> None:
    sleep = python_cmd("import time; time.sleep(60)")
    specs = {"Worker": replica(sleep, replicas=2), "PS": replica(sleep), "Chief": replica(sleep)}
    create(custom, namespace, job_body("cfg", specs))
    wait_for(lambda: len(_pods(core, namespace, "cfg")) == 4, timeout=30, what="4 pods")
    pods = _pods(core, namespace, "cfg")
    config = _tf_config(pods["cfg-worker-1"])
    assert list(config) == ["cluster", "task", "environment"] and config["environment"] == "cloud"
    assert config["task"] == {"type": "worker", "index": 1}
    assert sorted(config["cluster"]) == list(config["cluster"]) == ["chief", "ps", "worker"]
    assert len(config["cluster"]["worker"]) == 2 and all(
        e.endswith(":2222") for e in config["cluster"]["worker"]
    )
    raw = next(e.value for e in pods["cfg-worker-1"].spec.containers[0].env if e.name == "TF_CONFIG")
    assert " " not in raw  # Go's json.Marshal
    # every replica sees the same cluster; the chief has the master role
    assert all(_tf_config(p)["cluster"] == config["cluster"] for p in pods.values())
    assert pods["cfg-chief-0"].metadata.labels["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in pods["cfg-worker-0"].metadata.labels
    assert pods["cfg-worker-0"].spec.restart_policy == "Never"  # TFJob's default restart policy
    services = {s.metadata.name for s in core.list_namespaced_service(namespace).items}
    assert {"cfg-chief-0", "cfg-worker-0", "cfg-worker-1", "cfg-ps-0"} <= services


def test_single_replica_gets_no_tf_config(custom: Any, core: Any, namespace: str) -> None:
    code = "import os; print('TF_CONFIG' in os.environ, flush=True)"
    create(custom, namespace, job_body("solo", {"Worker": replica(python_cmd(code))}))
    job = _finished(custom, namespace, "solo")
    assert (condition(job, "Succeeded") or {}).get("status") == "True"
    assert pod_helpers.read_log(core, namespace, "solo-worker-0").strip() == "False"


def test_default_success_policy_is_worker_0_all_workers_waits(custom: Any, namespace: str) -> None:
    """Without a Chief: worker 0 exiting 0 succeeds the job by default; AllWorkers waits for worker 1."""
    code = (
        "import json, os, time; t = json.loads(os.environ['TF_CONFIG'])['task'];"
        " time.sleep(0 if t['index'] == 0 else 60)"
    )
    create(custom, namespace, job_body("w0", {"Worker": replica(python_cmd(code), replicas=2)}))
    job = _finished(custom, namespace, "w0")
    assert (condition(job, "Succeeded") or {}).get("status") == "True"
    create(
        custom,
        namespace,
        job_body("allw", {"Worker": replica(python_cmd(code), replicas=2)}, successPolicy="AllWorkers"),
    )
    wait_for(
        lambda: (
            (get(custom, namespace, "allw")["status"].get("replicaStatuses") or {})
            .get("Worker", {})
            .get("succeeded")
            == 1
        ),
        timeout=60,
        what="worker 0 succeeded",
    )
    job = get(custom, namespace, "allw")
    assert not finished(job) and (condition(job, "Running") or {}).get("status") == "True"


def test_a_failed_worker_with_restart_policy_never_fails_the_job(custom: Any, namespace: str) -> None:
    code = "import sys; print('boom', flush=True); sys.exit(3)"
    specs = {"Chief": replica(python_cmd("import time; time.sleep(60)")), "Worker": replica(python_cmd(code))}
    create(custom, namespace, job_body("bad", specs))
    job = _finished(custom, namespace, "bad")
    failed = condition(job, "Failed")
    assert failed is not None and failed["reason"] == "TFJobFailed"
    assert failed["message"] == f"TFJob {namespace}/bad has failed because 1 Worker replica(s) failed."


def test_exit_code_policy_restarts_a_retryable_failure(custom: Any, namespace: str) -> None:
    """ExitCode: 137 (a signal) is retryable, so the pod is replaced and the job is Restarting, not Failed."""
    worker = replica(python_cmd("import sys; sys.exit(137)"), restart="ExitCode")
    create(
        custom,
        namespace,
        job_body("rs", {"Worker": worker, "PS": replica(python_cmd("import time; time.sleep(60)"))}),
    )
    job = wait_for(
        lambda: get(custom, namespace, "rs"),
        lambda j: condition(j, "Restarting"),
        timeout=60,
        what="Restarting",
    )
    restarting = condition(job, "Restarting")
    assert restarting is not None and restarting["reason"] == "TFJobRestarting"
    assert restarting["message"] == "job rs is restarting because Worker replica(s) failed."
    assert condition(job, "Failed") is None


def test_webhook_denials_and_stored_defaults(custom: Any, namespace: str) -> None:
    with pytest.raises(ApiException) as info:
        create(custom, namespace, job_body("two", {"Chief": replica(), "Master": replica()}))
    assert info.value.status == 403
    body = json.loads(info.value.body)
    assert body["message"].startswith(
        'admission webhook "validator.tfjob.training-operator.kubeflow.org" denied the request: '
    )
    assert "must not have more than 1 Chief or Master role" in body["message"]
    with pytest.raises(ApiException) as info:
        bad = replica()
        bad["template"]["spec"]["containers"][0]["name"] = "tf"
        create(custom, namespace, job_body("noname", {"Worker": bad}))
    assert "must have at least one container with name tensorflow" in json.loads(info.value.body)["message"]
    sleep = python_cmd("import time; time.sleep(60)")
    made = create(custom, namespace, job_body("dflt", {"worker": replica(sleep, replicas=None)}))
    assert made["spec"]["successPolicy"] == "" and made["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    worker = made["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 1 and worker["restartPolicy"] == "Never"
    assert worker["template"]["spec"]["containers"][0]["ports"] == [
        {"name": "tfjob-port", "containerPort": 2222}
    ]
