"""The nightly deploy under real Airflow components: how much of ``deploy_model`` is rollout, how much is not.

``bench/deploy_phases.py`` times the operator in one process; this runs the same task (the arguments of
``dags/nightly_finetune.py``'s ``deploy_model``, the model URI from the run's conf) as its own one-task DAG
under the api-server, scheduler, dag-processor and triggerer of ``airflow_k8s_ml.testbed.airflow_stack`` (what
``make demo`` and the production tests run), against the embedded cluster and S3 with real timings.
Three runs: a first deploy, a new model (rolling update), and the new model's task cleared (no write).

Printed per run, from the task instance and the timestamps of its own log lines: worker time before the
deferral (process start, DAG parse, apply), Airflow's hand-over to the triggerer (deferral -> the trigger's
first line), the rollout as the trigger saw it (first progress line -> "successfully rolled out"), and
Airflow's hand-back (rolled out -> ``execute_complete`` running on a worker), then the smoke test.

    python bench/deploy_airflow.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DAG_ID = "deploy_bench"
DAG_FILE = '''
"""One task: the nightly DAG's deploy_model, its model URI from the run's conf (bench/deploy_airflow.py)."""
import pendulum
from airflow.sdk import DAG

from airflow_k8s_ml.operators import InferenceDeploymentOperator

NIGHTLY = {nightly!r}
with DAG(dag_id="deploy_bench", schedule=None, start_date=pendulum.datetime(2026, 1, 1), catchup=False):
    MODEL = "{{{{ dag_run.conf['model_uri'] }}}}"
    InferenceDeploymentOperator(task_id="deploy_model", **{{**NIGHTLY, "model_uri": MODEL}})
'''


def nightly_deploy_arguments() -> dict[str, Any]:
    """The keyword arguments of the nightly DAG's ``deploy_model`` (read from the parsed DAG)."""
    namespace: dict[str, Any] = {}
    path = Path(__file__).resolve().parents[1] / "dags" / "nightly_finetune.py"
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    task = namespace["dag"].get_task("deploy_model")
    names = (
        "name", "namespace", "image", "command", "env_from", "requests", "port", "readiness_path",
        "liveness_path", "autoscaling", "pdb_min_available", "smoke_path", "smoke_request",
        "expected_response",
    )  # fmt: skip
    args = {name: getattr(task, name) for name in names}
    args["rollout_timeout"] = task.rollout_timeout.total_seconds()
    return args


def _ts(entry: dict[str, Any]) -> float | None:
    stamp = entry.get("timestamp")
    if not stamp:
        return None
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def phases(log: list[dict[str, Any]], ti: dict[str, Any]) -> dict[str, float]:
    """Seconds per phase from the task log's own timestamps (worker and triggerer lines are both in it)."""

    def first(*needles: str) -> float | None:
        for entry in log:
            text = str(entry.get("event", ""))
            if all(n in text for n in needles) and _ts(entry) is not None:
                return _ts(entry)
        return None

    start = datetime.fromisoformat(ti["start_date"].replace("Z", "+00:00")).timestamp()
    end = datetime.fromisoformat(ti["end_date"].replace("Z", "+00:00")).timestamp()
    applied = first("applied ")
    waiting = first("waiting for the rollout")
    rolled = first("successfully rolled out")
    resumed = first("rolled out at revision")
    out = {"task_instance_total": end - start}
    if applied is not None:
        out["worker_start_and_apply"] = applied - start
    if waiting and rolled:
        out["rollout"] = rolled - waiting  # as seen by whoever followed it (trigger or worker)
    if rolled and resumed:
        out["rolled_out_to_execute_complete"] = resumed - rolled  # the hand-back when deferred
    if resumed:
        out["smoke_and_finish"] = end - resumed
    return {k: round(v, 2) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    from airflow_k8s_ml.testbed import demo
    from airflow_k8s_ml.testbed.airflow_stack import AirflowStack, StackSettings

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="deploy-airflow-") as tmp:
        root = Path(tmp)
        dags = root / "dags"
        dags.mkdir()
        (dags / "deploy_bench.py").write_text(DAG_FILE.format(nightly=nightly_deploy_arguments()))
        with demo.embedded_services(root / "state") as services:
            demo.prepare_cluster(services)
            demo.seed(services, root / "seed.log")
            s3 = services.s3.client()
            source, target = "base-model/step-1/", "candidates/b/step-1/"
            for item in s3.list_objects_v2(Bucket=demo.BUCKET, Prefix=source)["Contents"]:
                key = item["Key"]
                copy = {"Bucket": demo.BUCKET, "Key": key}
                s3.copy_object(Bucket=demo.BUCKET, Key=target + key[len(source) :], CopySource=copy)
            settings = StackSettings(
                home=root / "airflow-home", dags_folder=dags, env=demo.connections(services)
            )
            with AirflowStack(settings) as stack:
                rest = stack.rest
                rest.wait_dag(DAG_ID)
                rest.set_paused(DAG_ID, False)
                runs = [
                    ("first", f"s3://{demo.BUCKET}/{source}"),
                    ("new-model", f"s3://{demo.BUCKET}/{target}"),
                ]
                last_run = ""
                for name, model in runs:
                    started = time.monotonic()
                    last_run = rest.trigger(DAG_ID, {"model_uri": model})
                    rest.wait_run(DAG_ID, last_run, timeout=600)
                    results[name] = report(rest, last_run, 1, time.monotonic() - started)
                rest.clear_task(DAG_ID, last_run, "deploy_model")
                started = time.monotonic()
                rest.wait_for(
                    "the cleared try to finish",
                    lambda: (
                        rest.task_instance(DAG_ID, last_run, "deploy_model").get("try_number") == 2
                        and rest.task_instance(DAG_ID, last_run, "deploy_model").get("state") == "success"
                    ),
                    timeout=300,
                )
                results["clear"] = report(rest, last_run, 2, time.monotonic() - started)
    for name, figures in results.items():
        print(f"\n== {name} ==")
        for key, value in figures.items():
            print(f"{key:>26}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


def report(rest: Any, run_id: str, try_number: int, wall: float) -> dict[str, Any]:
    ti = rest.task_instance(DAG_ID, run_id, "deploy_model")
    log = rest.task_log(DAG_ID, run_id, "deploy_model", try_number)
    for entry in log:
        text = str(entry.get("event", ""))
        if text.startswith(("applied ", "rollout revision", "waiting for", "deployment ", "smoke:")):
            print(f"  [{run_id} try {try_number}] {entry.get('timestamp')} {text[:150]}")
    figures: dict[str, Any] = {"trigger_to_run_end_wall": round(wall, 2), **phases(log, ti)}
    xcom = rest.xcom(DAG_ID, run_id, "deploy_model")
    figures["changes"] = (xcom or {}).get("changes")
    return figures


if __name__ == "__main__":
    sys.exit(main())
