"""Importing the trigger module (what the triggerer and a deferring operator do) stays light: the clients
(kubernetes_asyncio, aiohttp, kubernetes) are imported inside ``run``, not at import time."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import airflow_k8s_ml.triggers.workload, airflow_k8s_ml.deadlines, airflow_k8s_ml.triggers.events
import airflow_k8s_ml.kube.resources, airflow_k8s_ml.kube.watch, airflow_k8s_ml.kube.async_client
heavy = ("kubernetes", "kubernetes_asyncio", "aiohttp", "boto3", "botocore", "torch")
print(",".join(sorted(name for name in heavy if name in sys.modules)))
"""


def test_trigger_modules_import_no_client() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip().splitlines()[-1:] in ([], [""]), out.stdout
