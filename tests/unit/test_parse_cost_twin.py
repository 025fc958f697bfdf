"""``bench/parse_cost.py`` compares the nightly DAG with its EmptyOperator twin; the twin is generated from
the real DAG's structure, and this checks it is the same DAG but for the operator classes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _structure(dag: Any) -> dict[str, Any]:
    return {
        "dag": (
            dag.dag_id,
            dag.description,
            dag.doc_md,
            dag.catchup,
            dag.max_active_runs,
            dag.dagrun_timeout,
        ),
        "schedule": repr(dag.timetable),
        "default_args": dag.default_args,
        "tags": set(dag.tags),
        "filters": set(dag.user_defined_filters or {}),
        "params": {name: dag.params.get_param(name).dump() for name in dag.params},
        "tasks": {
            task.task_id: (
                sorted(task.downstream_task_ids),
                task.trigger_rule,
                task.doc_md,
                task.retries,
                task.retry_delay,
            )
            for task in dag.tasks
        },
    }


def test_the_twin_is_the_nightly_dag_with_empty_operators(tmp_path: Path) -> None:
    bench = _module(REPO / "bench" / "parse_cost.py", "parse_cost_bench")
    twin_file = tmp_path / "twin.py"
    twin_file.write_text(bench.empty_twin_source(bench.NIGHTLY_DAG))
    nightly, twin = _module(bench.NIGHTLY_DAG, "nightly_real").dag, _module(twin_file, "nightly_twin").dag
    assert _structure(twin) == _structure(nightly)
    assert {type(task).__name__ for task in twin.tasks} == {"EmptyOperator"}
    assert {type(task).__name__ for task in nightly.tasks} > {
        "FineTuneJobOperator",
        "InferenceDeploymentOperator",
    }
