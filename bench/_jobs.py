"""The benches' Job: one pod running a Python program, no retry (a bench measures one run of it)."""

from __future__ import annotations

from typing import Any


def python_job(name: str, code: str) -> dict[str, Any]:
    container = {"name": "main", "image": "python:3.11", "command": ["python", "-c", code]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }
