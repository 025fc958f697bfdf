"""Which ``airflow`` command each component instance of a stack runs (testbed/airflow_stack.py)."""

from __future__ import annotations

from pathlib import Path

from airflow_k8s_ml.testbed.airflow_stack import COMPONENTS, HA_COMPONENTS, StackSettings, command


def test_the_quick_stack_is_one_of_each_and_the_ha_stack_two_schedulers_triggerers_and_workers() -> None:
    quick = StackSettings(home=Path("h"), dags_folder=Path("d"))
    ha = StackSettings(home=Path("h"), dags_folder=Path("d"), ha=True)
    assert quick.fleet == COMPONENTS == ("api-server", "scheduler", "dag-processor", "triggerer")
    assert ha.fleet == HA_COMPONENTS
    kinds = [name.rsplit("-", 1)[0] for name in HA_COMPONENTS if name[-1].isdigit()]
    assert sorted(kinds) == ["scheduler", "scheduler", "triggerer", "triggerer", "worker", "worker"]


def test_each_instance_runs_its_component_without_a_log_server() -> None:
    settings = StackSettings(home=Path("h"), dags_folder=Path("d"), ha=True, worker_concurrency=8)
    assert command("triggerer-2", settings) == ["triggerer", "--skip-serve-logs"]
    assert command("scheduler-1", settings) == ["scheduler", "--skip-serve-logs"]
    assert command("api-server", settings) == ["api-server"]
    assert command("dag-processor", settings) == ["dag-processor"]
    # Celery workers: a hostname each (two on one host would otherwise clash), no log server on 8793
    assert command("worker-2", settings) == [
        "celery",
        "worker",
        "--celery-hostname",
        "worker-2@%h",
        "--concurrency",
        "8",
        "--skip-serve-logs",
    ]
