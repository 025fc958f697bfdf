"""Where the UI plugin's pages are: the Training tab and the approved-checkpoint page of a task instance.

Why a module of its own: the plugin (:mod:`.ui.plugin`) serves these pages and the operators' extra links
(:mod:`.operators.links`) point at them; operators and the UI are independent siblings of the Airflow
surface, so the paths live below both. Import-light: Airflow's configuration is read inside the functions.
"""

from __future__ import annotations

from urllib.parse import urlencode

__all__ = ["TAB_PATH", "URL_PREFIX", "api_root", "checkpoint_path", "training_path"]

#: Where the api-server mounts the plugin's app (not one of Airflow's reserved prefixes).
URL_PREFIX = "/airflow-k8s-ml"
TAB_PATH = "/training"


def api_root() -> str:
    """The api-server's root path (``[api] base_url``'s path, "" at the root), so links survive a prefix."""
    from urllib.parse import urlsplit

    from airflow.configuration import conf

    return urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")


def training_path(
    dag_id: str, run_id: str, task_id: str, map_index: int = -1, *, root: str | None = None
) -> str:
    """The Training tab's page of one task instance (URL-quoted): under ``root`` (an api-server URL) when
    given, else relative to the api-server's host (``[api] base_url``'s path)."""
    query = urlencode({"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index})
    prefix = api_root() if root is None else root.rstrip("/")
    return f"{prefix}{URL_PREFIX}{TAB_PATH}?{query}"


def checkpoint_path(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The approved-checkpoint page of a CheckpointCheckOperator task instance."""
    query = urlencode({"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index})
    return f"{api_root()}{URL_PREFIX}/checkpoint?{query}"
