"""The pure layers must stay import-light: DAG files import them at parse time."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "kubernetes",
    "kubernetes_asyncio",
    "aiohttp",
    "boto3",
    "botocore",
    "torch",
    "airflow",
    "croniter",
    "yaml",
)

SCRIPT = f"""
import sys
import airflow_k8s_ml.manifests as m
import airflow_k8s_ml.status
from airflow_k8s_ml.manifests import training, serving, batch, raw, pod, naming, quantities, cron, validation
from airflow_k8s_ml.status import classify, WorkloadState
spec = m.FineTuneJobSpec(pod=m.PodTemplate(image="x"))
m.build_job(spec, "j", "ns", m.run_labels("d", "t", "r"))
bad = sorted(name for name in {HEAVY!r} if name in sys.modules)
print(",".join(bad))
"""


def test_pure_layers_import_no_heavy_dependencies():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "", f"imported at module load: {out.stdout.strip()}"


def test_lazy_exports_resolve():
    import airflow_k8s_ml.manifests as m

    for name in m.__all__:
        assert getattr(m, name) is not None
