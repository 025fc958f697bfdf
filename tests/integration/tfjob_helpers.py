"""Helpers for the TFJob tests: build a job body from replica specs and read it back, through the real
``kubernetes`` client's CustomObjectsApi."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"
REPO = Path(__file__).resolve().parents[2]
Job = dict[str, Any]

#: The reference workload, run from this checkout (pods run on the host's Python).
TOPOLOGY = ["python", "-m", "airflow_k8s_ml.workloads.tf_topology", "--timeout", "60"]


def replica(
    command: list[str] | None = None, replicas: int | None = 1, restart: str | None = None, **container: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [
                    {
                        "name": "tensorflow",
                        "image": "python:3.11",
                        "command": command or TOPOLOGY,
                        "env": [{"name": "PYTHONPATH", "value": str(REPO)}],
                        **container,
                    }
                ],
            }
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    if restart is not None:
        spec["restartPolicy"] = restart
    return spec


def job_body(name: str, specs: dict[str, Any], **spec: Any) -> Job:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": specs, **spec},
    }


def create(custom: client.CustomObjectsApi, namespace: str, body: Job) -> Job:
    return custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)  # type: ignore[no-any-return]


def get(custom: client.CustomObjectsApi, namespace: str, name: str) -> Job:
    return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)  # type: ignore[no-any-return]


def condition(job: Job, type_: str) -> dict[str, Any] | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def finished(job: Job) -> bool:
    return any((condition(job, t) or {}).get("status") == "True" for t in ("Succeeded", "Failed"))
