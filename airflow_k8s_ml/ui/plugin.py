"""``AirflowK8sMLPlugin``: the Training tab (an external view on every task instance) and its FastAPI app.

Registered through the ``airflow.plugins`` entry point in ``pyproject.toml`` - the group Airflow 3.3's
plugins manager always loads (``_load_entrypoint_plugins``) - and listed under ``plugins`` in
``get_provider_info`` so ``airflow providers`` shows it. (Airflow also loads providers' ``plugins`` when
``[core] lazy_discover_providers`` is False; it then skips the second copy by name, with a warning.)

Why this module is tiny: workers load plugins for macros and the dag processor for timetables, so it is
imported far from the api-server. The FastAPI app (FastAPI itself costs ~0.6 s to import) is built only when
``fastapi_apps`` is read, which only the api-server does.

The tab's URL uses the placeholders the UI fills for ``destination="task_instance"`` views
(``{DAG_ID}``, ``{RUN_ID}``, ``{TASK_ID}``, ``{MAP_INDEX}``, URL-encoded); the UI shows it in an iframe
whose sandbox lets scripts run, so the page is static HTML with inline SVG under a no-script CSP
(``app.py``). It appears on every task instance; the page of a task that is not a training task says so.
The pages' paths are in :mod:`airflow_k8s_ml.plugin_paths` (the operators' extra links point at them too).
"""

from __future__ import annotations

import threading
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_k8s_ml.plugin_paths import TAB_PATH, URL_PREFIX, api_root

__all__ = ["NAME", "AirflowK8sMLPlugin"]

NAME = "airflow_k8s_ml"
_TAB_QUERY = "dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}"


class _BuiltOnce:
    """A class attribute computed on first read, for the class and its instances alike.

    (Airflow reads ``fastapi_apps`` from an instance for entry-point plugins and from the class for
    providers' plugins, so a ``property`` would not do.)
    """

    def __init__(self, build: Any) -> None:
        self.build = build
        self.value: Any = None
        self.lock = threading.Lock()

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        with self.lock:
            if self.value is None:
                self.value = self.build()
            return self.value


def _fastapi_apps() -> list[dict[str, Any]]:
    from airflow_k8s_ml.ui.app import create_app

    return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "airflow-k8s-ml training"}]


def _external_views() -> list[dict[str, Any]]:
    return [
        {
            "name": "Training",
            "href": f"{api_root()}{URL_PREFIX}{TAB_PATH}?{_TAB_QUERY}",
            "destination": "task_instance",
            "url_route": "airflow-k8s-ml-training",
            "category": "airflow-k8s-ml",
        }
    ]


class AirflowK8sMLPlugin(AirflowPlugin):
    """The provider's UI: a Training tab on task instances, served by the plugin's FastAPI app."""

    name = NAME
    fastapi_apps = _BuiltOnce(_fastapi_apps)  # type: ignore[assignment]
    external_views = _BuiltOnce(_external_views)  # type: ignore[assignment]
