"""``airflow_k8s_ml.worker_preload``: Airflow's Celery configuration plus our heavy modules in Celery's
``imports``, which Celery's own loader imports when a worker starts (before it forks its pool, so every task
process inherits them)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from airflow_k8s_ml.worker_preload import celery_config

WORKER_START = textwrap.dedent(
    """
    import sys
    from celery import Celery
    from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG
    from airflow_k8s_ml.worker_preload import CELERY_CONFIG, PRELOADED

    app = Celery("airflow.providers.celery.executors.celery_executor", config_source=CELERY_CONFIG)
    assert app.conf.broker_url == DEFAULT_CELERY_CONFIG["broker_url"], app.conf.broker_url
    assert tuple(app.conf.imports) == PRELOADED, app.conf.imports
    assert "kubernetes_asyncio" not in sys.modules and "airflow_k8s_ml.kube.sync_client" not in sys.modules
    app.loader.import_default_modules()  # what `celery worker` does as it starts
    missing = [name for name in (*PRELOADED, "kubernetes_asyncio") if name not in sys.modules]
    print("missing:", missing)
    """
)


def test_a_celery_worker_started_with_it_imports_the_providers_heavy_modules() -> None:
    done = subprocess.run([sys.executable, "-c", WORKER_START], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "missing: []" in done.stdout, done.stdout


def test_a_module_that_is_not_installed_is_left_out_and_existing_imports_are_kept() -> None:
    config = celery_config(
        {"broker_url": "redis://x", "imports": ("mine.tasks",)},
        ("airflow_k8s_ml.kube.sync_client", "not_installed_anywhere.hooks", "mine.tasks"),
    )
    assert config == {"broker_url": "redis://x", "imports": ("mine.tasks", "airflow_k8s_ml.kube.sync_client")}
