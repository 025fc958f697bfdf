"""Small DAGs for the production-mode fault tests: one short training Job each, real operators.

``short_training`` prints ``epoch=K/N`` once a second (the lines the tests count in the task log).
``burst_training`` prints ``step=K/N`` every 20 ms with no pause, so a kill of the triggerer lands inside a
burst whenever it comes (the relay's cursor is written at most once a second).
``slow_defer_training`` (and ``slow_defer_long_training``, slower epochs) is the same task with a pause
between creating the Job and deferring, on its first try only, so a test can kill the task process in
exactly that window (a worker dying there is the case adoption must handle); the pause is announced in the
task log.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_k8s_ml.operators import FineTuneJobOperator

EPOCHS = 12
TRAIN = (
    "import sys, time\n"
    f"for k in range(1, {EPOCHS} + 1):\n"
    f"    print(f'epoch={{k}}/{EPOCHS} loss={{1.0 / k:.4f}}', flush=True)\n"
    "    time.sleep(float(sys.argv[1]))\n"
    "print('training done', flush=True)\n"
)
COMMON: dict[str, Any] = {
    "namespace": "ml",
    "image": "ghcr.io/airflow-k8s-ml/workloads:0.1.0",
    "command": ["python", "-c", TRAIN],
    "retries": 1,
    "retry_delay": timedelta(seconds=1),
}
STEPS = 500
BURST = (
    "import time\n"
    f"for k in range(1, {STEPS} + 1):\n"
    f"    print(f'step={{k}}/{STEPS}', flush=True)\n"
    "    time.sleep(0.02)\n"
    "print('training done', flush=True)\n"
)
WINDOW_MARKER = "pausing between create and defer"


class SlowDeferJobOperator(FineTuneJobOperator):
    """Stands in for a worker that is slow (or dies) right after creating the Job."""

    def defer(self, **kwargs: Any) -> Any:  # type: ignore[override]
        if self._pause_before_defer:
            self.log.info("%s (try 1)", WINDOW_MARKER)
            time.sleep(120)
        return super().defer(**kwargs)

    def execute(self, context: Any) -> Any:
        self._pause_before_defer = context["ti"].try_number == 1
        return super().execute(context)


for dag_id, operator, pace in (
    ("short_training", FineTuneJobOperator, "1.0"),
    ("slow_defer_training", SlowDeferJobOperator, "0.3"),
    # for a Celery worker's death, noticed only when the task's heartbeat times out (60 s in the HA stack):
    # a training long enough (~135 s) to still run when the retry comes
    ("slow_defer_long_training", SlowDeferJobOperator, "8.0"),
):
    with DAG(dag_id, schedule=None, max_active_runs=4, tags=["test"]):
        operator(task_id="train", args=[pace], **COMMON)

with DAG("burst_training", schedule=None, max_active_runs=4, tags=["test"]):
    FineTuneJobOperator(task_id="train", **{**COMMON, "command": ["python", "-c", BURST]})
