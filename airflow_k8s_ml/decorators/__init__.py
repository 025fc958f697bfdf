"""Task decorators: ``@task.finetune_job`` and ``@task.pytorch_job`` (registered by the provider metadata).

``from airflow.sdk import task`` then ``@task.finetune_job(image=..., run_timeout=...)`` on a function: the
function runs inside the workload's pod(s) and its return value is the task's XCom. The decorator takes
every argument of the matching operator (:mod:`airflow_k8s_ml.decorators.training`).
"""

from __future__ import annotations
