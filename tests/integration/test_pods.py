"""Pods run as local processes: lifecycle, environment, restarts, signals, graceful deletion, admission.

Driven by the official ``kubernetes`` client over HTTPS against the shared local cluster, one namespace
per test. Timings are the shrunk ones of ``fast_settings`` (crash-loop back-off 0.2 s doubling to 1 s).
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
from kubernetes import client

from .pod_helpers import (
    condition,
    container_status,
    events_for,
    phase_is,
    pod_body,
    read_log,
    wait_pod,
    waiting_reason,
    watch_pod,
)


def test_pod_runs_to_success_with_status_events_and_logs(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_body("hello", "print('hello from a pod')"))

    pod = wait_pod(core, namespace, "hello", phase_is("Succeeded"))

    terminated = container_status(pod).state.terminated
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")
    assert terminated.container_id.startswith("local://") and terminated.finished_at is not None
    assert pod.spec.node_name == "local-node"
    assert pod.status.pod_ip.startswith("127.") and pod.status.pod_ip != "127.0.0.1"
    assert pod.status.host_ip == "127.0.0.1"
    assert pod.status.start_time is not None and pod.status.qos_class == "BestEffort"
    assert {c.type: (c.status, c.reason) for c in pod.status.conditions} == {
        "PodReadyToStartContainers": ("False", None),
        "Initialized": ("True", None),
        "Ready": ("False", "PodCompleted"),
        "ContainersReady": ("False", "PodCompleted"),
        "PodScheduled": ("True", None),
    }
    assert read_log(core, namespace, "hello") == "hello from a pod\n"
    reasons = [(e.source.component, e.reason) for e in events_for(core, namespace, "hello")]
    assert reasons == [
        ("default-scheduler", "Scheduled"),
        ("kubelet", "Pulled"),
        ("kubelet", "Created"),
        ("kubelet", "Started"),
    ]


def test_admission_defaults_and_422_messages(core: client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_pod(
        namespace, pod_body("defaults", restart="Always", command=["sleep", "0"], image="busybox")
    )
    spec = created.spec
    assert (
        spec.restart_policy,
        spec.termination_grace_period_seconds,
        spec.dns_policy,
        spec.scheduler_name,
        spec.service_account_name,
    ) == ("Always", 30, "ClusterFirst", "default-scheduler", "default")
    main = spec.containers[0]
    assert (main.image_pull_policy, main.termination_message_path, main.termination_message_policy) == (
        "Always",
        "/dev/termination-log",
        "File",
    )
    assert created.status.phase == "Pending"

    body = pod_body("no-image")
    del body["spec"]["containers"][0]["image"]
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(namespace, body)
    status = json.loads(err.value.body)
    assert (err.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"] == 'Pod "no-image" is invalid: spec.containers[0].image: Required value'
    assert status["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers[0].image"}
    ]

    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(namespace, {"metadata": {"name": "empty"}, "spec": {"containers": []}})
    assert json.loads(err.value.body)["message"] == 'Pod "empty" is invalid: spec.containers: Required value'


def test_env_from_values_field_refs_secrets_and_config_maps(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "creds"}, "data": {"token": base64.b64encode(b"s3cr3t").decode()}}
    )
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"lr": "0.01", "epochs": "3"}}
    )
    env = [
        {"name": "PLAIN", "value": "v"},
        {"name": "EXPANDED", "value": "lr=$(CFG_lr) plain=$(PLAIN) kept=$(NOPE) $$(ESCAPED)"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "EPOCHS", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "epochs"}}},
        {"name": "MAYBE", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "x", "optional": True}}},
        {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
    ]
    body = pod_body(
        "env",
        "import json, os; print(json.dumps(dict(os.environ)))",
        container={"env": env, "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}]},
    )
    body["metadata"]["labels"] = {"app": "trainer"}
    core.create_namespaced_pod(namespace, body)

    pod = wait_pod(core, namespace, "env", phase_is("Succeeded", "Failed"))
    seen = json.loads(read_log(core, namespace, "env"))
    assert seen["PLAIN"] == "v" and seen["EXPANDED"] == "lr=0.01 plain=v kept=$(NOPE) $(ESCAPED)"
    assert (seen["POD_NAME"], seen["POD_NS"], seen["APP"]) == ("env", namespace, "trainer")
    assert seen["POD_IP"] == pod.status.pod_ip and seen["NODE"] == "local-node"
    assert (seen["TOKEN"], seen["EPOCHS"], seen["CFG_lr"], seen["CFG_epochs"]) == ("s3cr3t", "3", "0.01", "3")
    assert "MAYBE" not in seen and seen["CPU_LIMIT"] == "8"
    assert seen["KUBERNETES_SERVICE_HOST"] == "127.0.0.1" and seen["KUBERNETES_SERVICE_PORT"].isdigit()
    assert seen["HOSTNAME"] == "env" and seen["CUDA_VISIBLE_DEVICES"] == ""


def test_missing_secret_is_create_container_config_error_until_it_exists(
    core: client.CoreV1Api, namespace: str
) -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "later", "key": "token"}}}]
    core.create_namespaced_pod(
        namespace, pod_body("cfg", "import os; print(os.environ['TOKEN'])", container={"env": env})
    )

    pod = wait_pod(core, namespace, "cfg", lambda p: waiting_reason(p) == "CreateContainerConfigError")
    assert container_status(pod).state.waiting.message == 'secret "later" not found'
    assert pod.status.phase == "Pending"

    core.create_namespaced_secret(namespace, {"metadata": {"name": "later"}, "stringData": {"token": "t"}})
    wait_pod(core, namespace, "cfg", phase_is("Succeeded"))
    assert read_log(core, namespace, "cfg") == "t\n"


def test_working_dir(core: client.CoreV1Api, namespace: str, tmp_path: Path) -> None:
    code = "import os; print(os.getcwd())"
    core.create_namespaced_pod(namespace, pod_body("host-dir", code, container={"workingDir": str(tmp_path)}))
    core.create_namespaced_pod(namespace, pod_body("private", code, container={"workingDir": "/app/work"}))

    wait_pod(core, namespace, "host-dir", phase_is("Succeeded"))
    wait_pod(core, namespace, "private", phase_is("Succeeded"))
    assert read_log(core, namespace, "host-dir").strip() == str(tmp_path)
    assert read_log(core, namespace, "private").strip().endswith("/rootfs/app/work")


def test_never_failing_pod_is_failed_with_its_exit_code(core: client.CoreV1Api, namespace: str) -> None:
    code = "import sys; open('/dev/termination-log', 'w').write('bad input'); sys.exit(3)"
    core.create_namespaced_pod(namespace, pod_body("fails", code))

    pod = wait_pod(core, namespace, "fails", phase_is("Failed", "Succeeded"))
    terminated = container_status(pod).state.terminated
    assert (pod.status.phase, terminated.exit_code, terminated.reason) == ("Failed", 3, "Error")
    assert terminated.message == "bad input"
    assert container_status(pod).restart_count == 0
    assert condition(pod, "Ready").reason == "PodFailed"


def test_on_failure_restarts_in_place_with_crash_loop_back_off(
    core: client.CoreV1Api, namespace: str
) -> None:
    # Fails on the first three runs, succeeds on the fourth; the emptyDir survives restarts in place.
    code = (
        "import pathlib, sys; f = pathlib.Path('/work/runs')\n"
        "n = int(f.read_text()) + 1 if f.exists() else 1\n"
        "f.write_text(str(n)); print('run', n); sys.exit(0 if n >= 4 else 1)\n"
    )
    body = pod_body(
        "flaky",
        code,
        restart="OnFailure",
        container={"volumeMounts": [{"name": "work", "mountPath": "/work"}]},
        volumes=[{"name": "work", "emptyDir": {}}],
    )
    created = core.create_namespaced_pod(namespace, body)

    seen = watch_pod(
        core, namespace, "flaky", phase_is("Succeeded", "Failed"), since=created.metadata.resource_version
    )
    back_offs = [
        container_status(p).state.waiting.message for p in seen if waiting_reason(p) == "CrashLoopBackOff"
    ]
    assert back_offs, "CrashLoopBackOff was never reported"
    uid = seen[-1].metadata.uid
    assert back_offs[0] == f"back-off 200ms restarting failed container=main pod=flaky_{namespace}({uid})"
    assert any("back-off 400ms" in m for m in back_offs)
    counts = [container_status(p).restart_count for p in seen if p.status.container_statuses]
    assert counts == sorted(counts) and counts[-1] == 3
    final = seen[-1]
    assert final.status.phase == "Succeeded"
    assert container_status(final).last_state.terminated.exit_code == 1
    assert read_log(core, namespace, "flaky") == "run 4\n"
    assert read_log(core, namespace, "flaky", previous=True) == "run 3\n"
    assert any(e.reason == "BackOff" and e.type == "Warning" for e in events_for(core, namespace, "flaky"))


def test_signals_report_128_plus_n(core: client.CoreV1Api, namespace: str) -> None:
    def killer(name: str, sig: int) -> dict:
        return {
            "name": name,
            "image": "python:3.11",
            "command": ["python", "-c", f"import os; os.kill(os.getpid(), {sig})"],
        }

    body = {
        "metadata": {"name": "signals"},
        "spec": {"restartPolicy": "Never", "containers": [killer("kill9", 9), killer("term15", 15)]},
    }
    core.create_namespaced_pod(namespace, body)

    pod = wait_pod(core, namespace, "signals", phase_is("Failed", "Succeeded"))
    assert pod.status.phase == "Failed"
    assert container_status(pod, "kill9").state.terminated.exit_code == 137
    assert container_status(pod, "term15").state.terminated.exit_code == 143
    assert container_status(pod, "term15").state.terminated.reason == "Error"


def test_start_error_for_a_missing_executable(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_body("missing", command=["no-such-binary-here"]))

    pod = wait_pod(core, namespace, "missing", phase_is("Failed"))
    terminated = container_status(pod).state.terminated
    assert (terminated.exit_code, terminated.reason) == (128, "StartError")
    assert 'exec: "no-such-binary-here": executable file not found in $PATH' in terminated.message


def test_graceful_delete_sends_sigterm_then_removes_the_pod(
    core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    marker = tmp_path / "got-sigterm"
    code = (
        "import signal, sys, time, pathlib\n"
        "def bye(*_):\n"
        f"    pathlib.Path({str(marker)!r}).write_text('bye'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    core.create_namespaced_pod(namespace, pod_body("graceful", code, terminationGracePeriodSeconds=20))
    wait_pod(
        core,
        namespace,
        "graceful",
        lambda p: (
            read_log(core, namespace, "graceful") == "ready\n" if p.status.phase == "Running" else False
        ),
    )

    started = time.monotonic()
    deleted = core.delete_namespaced_pod("graceful", namespace)
    assert (
        deleted.metadata.deletion_timestamp is not None
        and deleted.metadata.deletion_grace_period_seconds == 20
    )

    with pytest.raises(client.ApiException) as gone:
        wait_pod(core, namespace, "graceful", lambda p: False, timeout=15)
    assert gone.value.status == 404
    took = time.monotonic() - started
    assert took < 15, f"gone after {took:.1f} s: it exited on SIGTERM, the 20 s grace was not needed"
    assert marker.read_text() == "bye"
    assert any(
        e.reason == "Killing" and e.message == "Stopping container main"
        for e in events_for(core, namespace, "graceful")
    )


def test_sigkill_after_the_grace_period(core: client.CoreV1Api, namespace: str) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('up', flush=True); time.sleep(9)"
    )
    core.create_namespaced_pod(namespace, pod_body("stubborn", code))
    wait_pod(
        core,
        namespace,
        "stubborn",
        lambda p: p.status.phase == "Running" and read_log(core, namespace, "stubborn") == "up\n",
    )

    deleted = core.delete_namespaced_pod("stubborn", namespace, grace_period_seconds=1)
    seen = watch_pod(
        core,
        namespace,
        "stubborn",
        lambda p: container_status(p).state.terminated is not None,
        timeout=10,
        since=deleted.metadata.resource_version,
    )
    assert container_status(seen[-1]).state.terminated.exit_code == 137
    assert seen[-1].status.phase == "Failed"


def test_active_deadline_fails_the_pod(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(
        namespace,
        pod_body("slow", command=["sleep", "30"], activeDeadlineSeconds=1, terminationGracePeriodSeconds=1),
    )

    pod = wait_pod(core, namespace, "slow", phase_is("Failed"), timeout=10)
    assert (pod.status.reason, pod.status.message) == (
        "DeadlineExceeded",
        "Pod was active on the node longer than the specified deadline",
    )
    assert container_status(pod).state.terminated.exit_code == 143


def test_node_object(core: client.CoreV1Api) -> None:
    node = core.read_node("local-node")
    assert node.status.capacity["cpu"] == "8" and node.status.allocatable["memory"] == "32Gi"
    assert "nvidia.com/gpu" not in node.status.capacity
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("True", "KubeletReady")
    assert node.status.node_info.kubelet_version.startswith("v1.")
