"""The ``task_state_store`` keys our operators write and the UI plugin reads.

Why a module of its own: the writer (the operators) and the reader (the Training tab, :mod:`.ui.facts`) are
independent siblings of the Airflow surface, so neither may import the other; both import the keys from here.
Renaming a key breaks in-flight retries of deployed DAGs (the old key is what they stored). Constants only.
"""

from __future__ import annotations

__all__ = ["OUTCOME_KEY", "STATE_KEY"]

#: The workload record of the current attempt (:class:`~airflow_k8s_ml.operators.record.WorkloadRecord`):
#: kind, name, namespace, uid, attempt, submission time, resume point, and the result once succeeded.
STATE_KEY = "airflow_k8s_ml.workload"
#: The outcome of a failed attempt (:func:`~airflow_k8s_ml.operators.outcome.outcome_record`).
OUTCOME_KEY = "airflow_k8s_ml.outcome"
