"""Task decorators: ``@task.finetune_job``, ``@task.pytorch_job`` (:mod:`~airflow_k8s_ml.decorators.training`)
and ``@task.train_job`` (:mod:`~airflow_k8s_ml.decorators.trainjob`), registered by the provider metadata.

``from airflow.sdk import task`` then ``@task.finetune_job(image=..., run_timeout=...)`` on a function: the
function runs inside the workload's pod(s) and its return value is the task's XCom. The decorator takes
every argument of the matching operator.
"""

from __future__ import annotations
