"""The UI plugin as Airflow's plugins manager finds it: from the ``airflow.plugins`` entry point of the
installed package (nothing copied into plugins/), with a task-instance external view whose URL the UI can
fill, and a FastAPI app that is built only when the api-server asks for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DISCOVER = """
import json, sys
from airflow import plugins_manager
plugins_manager.get_timetables_plugins()  # loads every plugin, as the dag processor does
before = "fastapi" in sys.modules, "airflow_k8s_ml.ui.app" in sys.modules
info = {p["name"]: p for p in plugins_manager.get_plugin_info(["external_views", "source"])}
apps, _ = plugins_manager.get_fastapi_plugins()
ours = [a for a in apps if a["url_prefix"] == "/airflow-k8s-ml"]
routes = sorted(r.path for r in ours[0]["app"].routes) if ours else []
print(json.dumps({"info": info.get("airflow_k8s_ml"), "errors": plugins_manager.get_import_errors(),
                  "heavy_before_apps": before, "routes": routes}, default=str))
"""


def _run(code: str, home: Path) -> dict:
    (home / "plugins").mkdir(exist_ok=True)
    env = {"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": "/usr/bin:/bin"}
    # cwd outside the repository: its setuptools ``*.egg-info`` would list the entry point a second time.
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=home
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_plugins_manager_discovers_the_plugin_from_the_entry_point(tmp_path: Path) -> None:
    found = _run(DISCOVER, tmp_path)
    assert found["errors"] == {}
    info = found["info"]
    assert info is not None, "airflow_k8s_ml plugin not discovered"
    assert "EntryPoint(name='airflow_k8s_ml'" in info["source"] and not list((tmp_path / "plugins").iterdir())
    (view,) = info["external_views"]
    assert view["destination"] == "task_instance" and view["name"] == "Training"
    for placeholder in ("{DAG_ID}", "{RUN_ID}", "{TASK_ID}", "{MAP_INDEX}"):
        assert placeholder in view["href"]
    assert view["href"].startswith("/airflow-k8s-ml/training?")
    # Loading the plugins (what every Airflow process does, the dag processor for timetables) built no app.
    assert found["heavy_before_apps"] == [False, False]
    assert {"/training", "/training/chart.svg", "/training/data.json", "/checkpoint"} <= set(found["routes"])
