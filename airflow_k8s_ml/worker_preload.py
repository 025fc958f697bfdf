"""Celery configuration for Airflow workers running this provider: its heavy modules imported once per worker.

Why: Airflow 3 starts every task try - and every resume after a deferral - in a process forked from the
Celery worker's pool process, so whatever that process has imported costs the task nothing. Airflow's Celery
provider preloads a few modules for that reason (``on_celery_import_modules``: the standard operators,
``kubernetes.client``), but not what our tasks need: the cncf provider's hooks module (which imports
``kubernetes_asyncio`` and ``aiohttp`` besides the sync client: 0.5 s warm, over 1 s on a busy machine),
the amazon S3 hook and our own operator, client and trigger modules. Measured by
``bench/dag_overhead.py``, each of our task starts paid that import again; a deferring task pays it twice.

Use it on the workers (and the scheduler, which reads the same option)::

    [celery]
    celery_config_options = airflow_k8s_ml.worker_preload.CELERY_CONFIG

It is Airflow's default Celery configuration plus Celery's ``imports`` (modules a worker imports when it
starts, before it forks its pool). A module whose distribution is not installed is left out, so an optional
provider missing never stops a worker. Imported only where configured: nothing else imports this module.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG

__all__ = ["CELERY_CONFIG", "PRELOADED"]

#: What a task of ours imports before its first request: the client on the cncf hook, the operators' and
#: triggers' modules, the checkpoint store on the amazon S3 hook.
PRELOADED = (
    "airflow.providers.cncf.kubernetes.hooks.kubernetes",
    "airflow.providers.amazon.aws.hooks.s3",
    "airflow_k8s_ml.kube.sync_client",
    "airflow_k8s_ml.operators._workload",
    "airflow_k8s_ml.operators.training",
    "airflow_k8s_ml.operators.inference",
    "airflow_k8s_ml.operators.batch_inference",
    "airflow_k8s_ml.operators.checkpoint",
    "airflow_k8s_ml.triggers.workload",
    "airflow_k8s_ml.triggers.sync_wait",
    "airflow_k8s_ml.checkpoints.store",
)


def _installed(name: str) -> bool:
    try:
        return find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def celery_config(base: dict[str, Any], modules: tuple[str, ...] = PRELOADED) -> dict[str, Any]:
    """``base`` with the installed ``modules`` added to Celery's ``imports``."""
    imports = tuple(base.get("imports") or ())
    return {**base, "imports": imports + tuple(m for m in modules if m not in imports and _installed(m))}


CELERY_CONFIG = celery_config(DEFAULT_CELERY_CONFIG)
