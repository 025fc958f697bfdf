"""Volumes of pods run as processes: configMap/secret files, emptyDir, hostPath, PVC persistence.

Mount paths are rewritten in command, args and env values to the host directory backing the volume
(see ``kubelet/mounts.py``), so the pod's code reads ``/etc/cfg/...`` as written.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from kubernetes import client

from .pod_helpers import condition, events_for, phase_is, pod_body, read_log, wait_pod


def test_config_map_secret_empty_dir_and_host_path(
    core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "cfg"}, "data": {"app.yaml": "lr: 0.1\n", "other": "x"}}
    )
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "sec"}, "data": {"password": base64.b64encode(b"hunter2").decode()}}
    )
    (tmp_path / "dataset.txt").write_text("rows")
    code = (
        "import json, os, stat\n"
        "out = {'cfg': sorted(os.listdir('/etc/cfg')), 'yaml': open('/etc/cfg/conf/app.yaml').read(),\n"
        "       'mode': oct(stat.S_IMODE(os.stat('/etc/cfg/conf/app.yaml').st_mode)),\n"
        "       'pw': open('/etc/secret/password').read(), 'data': open('/data/dataset.txt').read(),\n"
        "       'env': os.environ['SCRATCH']}\n"
        "open('/scratch/note', 'w').write('kept')\n"
        "out['scratch'] = open(os.environ['SCRATCH'] + '/note').read()\n"
        "print(json.dumps(out))\n"
    )
    mounts = [
        {"name": "cfg", "mountPath": "/etc/cfg"},
        {"name": "sec", "mountPath": "/etc/secret", "readOnly": True},
        {"name": "data", "mountPath": "/data"},
        {"name": "scratch", "mountPath": "/scratch"},
    ]
    volumes = [
        {
            "name": "cfg",
            "configMap": {
                "name": "cfg",
                "items": [{"key": "app.yaml", "path": "conf/app.yaml"}],
                "defaultMode": 0o440,
            },
        },
        {"name": "sec", "secret": {"secretName": "sec"}},
        {"name": "data", "hostPath": {"path": str(tmp_path), "type": "Directory"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    body = pod_body(
        "vols",
        code,
        volumes=volumes,
        container={"volumeMounts": mounts, "env": [{"name": "SCRATCH", "value": "/scratch"}]},
    )
    core.create_namespaced_pod(namespace, body)

    wait_pod(core, namespace, "vols", phase_is("Succeeded", "Failed"))
    seen = json.loads(read_log(core, namespace, "vols"))
    assert seen["cfg"] == ["conf"] and seen["yaml"] == "lr: 0.1\n" and seen["mode"] == "0o440"
    assert (seen["pw"], seen["data"], seen["scratch"]) == ("hunter2", "rows", "kept")
    assert seen["env"].endswith("/volumes/scratch")


def test_missing_config_map_volume_keeps_the_pod_container_creating(
    core: client.CoreV1Api, namespace: str
) -> None:
    body = pod_body(
        "nocfg",
        "print(open('/cfg/k').read())",
        volumes=[{"name": "cfg", "configMap": {"name": "later"}}],
        container={"volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]},
    )
    core.create_namespaced_pod(namespace, body)

    wait_pod(
        core,
        namespace,
        "nocfg",
        lambda p: any(e.reason == "FailedMount" for e in events_for(core, namespace, "nocfg")),
    )
    failed = next(e for e in events_for(core, namespace, "nocfg") if e.reason == "FailedMount")
    assert failed.message == 'MountVolume.SetUp failed for volume "cfg" : configmap "later" not found'
    pod = core.read_namespaced_pod("nocfg", namespace)
    assert pod.status.phase == "Pending"
    assert pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"

    core.create_namespaced_config_map(namespace, {"metadata": {"name": "later"}, "data": {"k": "v"}})
    wait_pod(core, namespace, "nocfg", phase_is("Succeeded"))
    assert read_log(core, namespace, "nocfg") == "v\n"


def test_persistent_volume_claim_data_outlives_pods(core: client.CoreV1Api, namespace: str) -> None:
    claim = {
        "metadata": {"name": "ckpt"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    core.create_namespaced_persistent_volume_claim(namespace, claim)

    def pod_using_claim(name: str, code: str) -> dict:
        return pod_body(
            name,
            code,
            volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}],
            container={"volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}]},
        )

    core.create_namespaced_pod(namespace, pod_using_claim("writer", "open('/ckpt/step', 'w').write('1200')"))
    wait_pod(core, namespace, "writer", phase_is("Succeeded"))
    core.delete_namespaced_pod("writer", namespace)
    core.create_namespaced_pod(namespace, pod_using_claim("reader", "print(open('/ckpt/step').read())"))
    wait_pod(core, namespace, "reader", phase_is("Succeeded"))

    assert read_log(core, namespace, "reader") == "1200\n"
    bound = core.read_namespaced_persistent_volume_claim("ckpt", namespace)
    assert bound.status.phase == "Bound" and bound.status.capacity == {"storage": "1Gi"}
    assert bound.spec.volume_name == f"pvc-{bound.metadata.uid}"


def test_missing_claim_leaves_the_pod_unschedulable(core: client.CoreV1Api, namespace: str) -> None:
    body = pod_body("orphan", "pass", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "nope"}}])
    core.create_namespaced_pod(namespace, body)

    pod = wait_pod(core, namespace, "orphan", lambda p: condition(p, "PodScheduled") is not None)
    scheduled = condition(pod, "PodScheduled")
    assert (scheduled.status, scheduled.reason, scheduled.message) == (
        "False",
        "Unschedulable",
        '0/1 nodes are available: persistentvolumeclaim "nope" not found.',
    )

    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "nope"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    wait_pod(core, namespace, "orphan", phase_is("Succeeded"))
