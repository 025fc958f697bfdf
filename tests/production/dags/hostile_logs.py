"""Training output meant to hurt the log relay, run by the real operators under the real triggerer.

``long_lines``: a 200,000-character line, then 10 MB without a newline, then 40 lines and a final one (the
10 MB line used to end the pod's stream, and every later line vanished without a word).
``flood``: 100,000 lines at once, more than the relay can put into the task log before its drain budget.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG

from airflow_k8s_ml.operators import FineTuneJobOperator

FLOOD_LINES = 100_000
LONG_LINES = (
    "import sys, time\n"
    "print('before', flush=True)\n"
    "print('y' * 200_000, flush=True)\n"
    "sys.stdout.write('x' * 10_000_000)\n"
    "for i in range(40):\n"
    "    print(f'after {i}', flush=True)\n"
    "print('final', flush=True)\n"
    "time.sleep(2)\n"
)
FLOOD = f"import time\ntime.sleep(2)\nfor i in range({FLOOD_LINES}):\n    print(f'flood {{i}}')\n"
COMMON: dict[str, Any] = {"namespace": "ml", "image": "ghcr.io/airflow-k8s-ml/workloads:0.1.0", "retries": 0}

with DAG("hostile_logs", schedule=None, max_active_runs=1, tags=["test"]):
    FineTuneJobOperator(task_id="long_lines", command=["python", "-c", LONG_LINES], **COMMON)
    FineTuneJobOperator(task_id="flood", command=["python", "-c", FLOOD], **COMMON)
