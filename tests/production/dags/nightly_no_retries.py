"""The shipped nightly DAG built with ``retries=0`` on its training tasks, under its own dag_id and without a
schedule: the production tier proves on it that a disruption spends no retry (there is none to spend). Built
by the shipped file's own ``build``, so it is the same pipeline, not a copy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: The shipped DAG file (this file is a symlink into the checkout, as the nightly DAG's is).
SHIPPED = Path(__file__).resolve().parents[3] / "dags" / "nightly_finetune.py"

_spec = importlib.util.spec_from_file_location("airflow_k8s_ml_shipped_nightly", SHIPPED)
assert _spec is not None and _spec.loader is not None
_nightly = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_nightly)

dag = _nightly.build("nightly_finetune_no_retries", training_retries=0, schedule=None)
