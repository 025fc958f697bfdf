"""The demo's summary: what the nightly DAG run did, read back from Airflow's database, the cluster and S3.

Separate from :mod:`airflow_k8s_ml.testbed.demo` (which orchestrates) so the report can be tested and reused:
``collect`` gathers facts, ``render`` formats them, ``draw_training_curve`` writes the PNG.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.errors import K8sMLError
from airflow_k8s_ml.testbed.airflow_rest import RestError

if TYPE_CHECKING:
    from airflow_k8s_ml.testbed.airflow_rest import AirflowRest


def _epoch(stamp: str | None) -> float | None:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


DEFERRING = "Pausing task as DEFERRED"
RESUMED = "::group::Pre Execute"


def split_worker_and_triggerer(entries: list[dict[str, Any]], end: float | None) -> tuple[float, float]:
    """(seconds on a worker, seconds deferred in the triggerer) of one try, from its task log.

    A deferral runs from the worker's "Pausing task as DEFERRED" line to the resumed task's first
    "Pre Execute" group on a worker, or the end of the try.
    Pure, so it is tested on recorded logs.
    """
    stamped = sorted(
        ((t, e) for e in entries if (t := _epoch(e.get("timestamp"))) is not None), key=lambda pair: pair[0]
    )
    if not stamped:
        return 0.0, 0.0
    start = stamped[0][0]
    finish = end if end is not None else stamped[-1][0]
    deferred, since = 0.0, None
    for stamp, entry in stamped:
        event = str(entry.get("event", ""))
        if since is None and event.startswith(DEFERRING):
            since = stamp
        elif since is not None and event == RESUMED:
            deferred += stamp - since
            since = None
    if since is not None:
        deferred += max(0.0, finish - since)
    return max(0.0, finish - start - deferred), deferred


def _try_log(rest: AirflowRest, dag_id: str, run_id: str, task_id: str, attempt: int) -> list[Any]:
    """One try's log entries; none when the API server no longer has that try (a try ended by Airflow's
    "state changed externally" race, retried at once, can be missing from the history: the summary then
    counts no time for it rather than failing the whole demo)."""
    try:
        return list(rest.task_log(dag_id, run_id, task_id, attempt))
    except RestError as exc:
        if exc.status != 404:
            raise
        return []


def _airflow_rows(rest: AirflowRest, dag_id: str, run_id: str) -> dict[str, Any]:
    """The run as the REST API reports it: state, task instances (with worker/triggerer time), XComs."""
    run = rest.run(dag_id, run_id)
    tasks, xcoms = [], {}
    for ti in rest.task_instances(dag_id, run_id):
        start, end = _epoch(ti.get("start_date")), _epoch(ti.get("end_date"))
        worker = deferred = 0.0
        if ti.get("state") in ("success", "failed"):
            for attempt in range(1, int(ti.get("try_number") or 0) + 1):
                entries = _try_log(rest, dag_id, run_id, ti["task_id"], attempt)
                on_worker, in_triggerer = split_worker_and_triggerer(entries, None)
                worker, deferred = worker + on_worker, deferred + in_triggerer
        tasks.append(
            {
                "task_id": ti["task_id"],
                "state": str(ti.get("state")),
                "try_number": ti.get("try_number"),
                "start": start,
                "end": end,
                "worker_seconds": worker,
                "deferred_seconds": deferred,
            }
        )
        if ti.get("state") == "success":
            value = rest.xcom(dag_id, run_id, ti["task_id"])
            if value is not None:
                xcoms[ti["task_id"]] = value
    tasks.sort(key=lambda t: t["start"] or float("inf"))
    return {
        "state": str(run["state"]),
        "run_id": run_id,
        "logical_date": run.get("logical_date"),
        "tasks": tasks,
        "xcoms": xcoms,
        "run_start": _epoch(run.get("start_date")),
        "run_end": _epoch(run.get("end_date")),
    }


def _history(checkpoint_uri: str, s3_env: dict[str, str], endpoint: str) -> list[dict[str, Any]]:
    """Per-epoch curve from the checkpoint's ``history.jsonl`` (written by the finetune workload)."""
    from airflow_k8s_ml.checkpoints import download_checkpoint

    os.environ.update({**s3_env, "AWS_ENDPOINT_URL": endpoint})
    with tempfile.TemporaryDirectory() as tmp:
        download_checkpoint(checkpoint_uri, tmp, verify=True)
        found = list(Path(tmp).rglob("history.jsonl"))
        if not found:
            return []
        return [json.loads(line) for line in found[0].read_text().splitlines() if line.strip()]


def _s3_json(uri: str, s3_env: dict[str, str], endpoint: str) -> dict[str, Any] | None:
    import boto3

    bucket, _, key = uri.removeprefix("s3://").partition("/")
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=s3_env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=s3_env["AWS_SECRET_ACCESS_KEY"],
        region_name=s3_env.get("AWS_DEFAULT_REGION", "us-east-1"),
    )
    try:
        return json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())  # type: ignore[no-any-return]
    except client.exceptions.NoSuchKey:
        return None


def _predict(kubeconfig: Path, deploy: dict[str, Any]) -> dict[str, Any] | None:
    """One prediction through the API server's service proxy, as a client outside the cluster would."""
    from kubernetes import config

    from airflow_k8s_ml.workloads.dataset import load_digits

    data = load_digits()
    features = [float(x) for x in data.features[-1]]
    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        path = deploy["service_url"].rstrip("/") + "/predict"
        response = api.call_api(
            path,
            "POST",
            header_params={"Content-Type": "application/json"},
            body={"instances": [features]},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        answer = json.loads(response.data)
        answer["expected"] = int(data.labels[-1])
        answer["path"] = path
        return answer  # type: ignore[no-any-return]
    finally:
        api.close()


def _rollout_seconds(kubeconfig: Path, deploy: dict[str, Any]) -> float:
    """The serving workload's own start-up: its ReplicaSet's creation to the Deployment becoming available
    (pods starting, model loading, readiness probes) - time the workload spends, not the orchestrator."""
    from kubernetes import client, config

    from airflow_k8s_ml.testbed.local_cluster.meta import parse_time

    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        apps = client.AppsV1Api(api)
        namespace = deploy["namespace"]
        deployment = apps.read_namespaced_deployment(deploy["deployment"], namespace)
        revision = str(deploy.get("revision"))
        sets = [
            rs
            for rs in apps.list_namespaced_replica_set(namespace).items
            if (rs.metadata.annotations or {}).get("deployment.kubernetes.io/revision") == revision
            and any(ref.uid == deployment.metadata.uid for ref in rs.metadata.owner_references or [])
        ]
        available = next((c for c in deployment.status.conditions or [] if c.type == "Available"), None)
        if not sets or available is None or available.last_transition_time is None:
            return 0.0
        created = parse_time(sets[0].metadata.creation_timestamp.isoformat())
        return max(0.0, parse_time(available.last_transition_time.isoformat()) - created)
    finally:
        api.close()


def _workload_seconds(kubeconfig: Path, result: dict[str, Any]) -> float:
    """A training or batch workload's own run time: from its XCom, else from its Jobs' status (``startTime``
    to ``completionTime``): the Job itself, or a TrainJob's node Jobs (a TrainJob's status has no times;
    its JobSet's Jobs carry ``jobset.sigs.k8s.io/jobset-name``)."""
    if result.get("duration_seconds"):
        return float(result["duration_seconds"])
    kind, name = result.get("kind", "Job"), result.get("name")
    if kind not in ("Job", "TrainJob") or not name:
        return 0.0
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        batch = client.BatchV1Api(api)
        if kind == "Job":
            statuses = [batch.read_namespaced_job(name, result["namespace"]).status]
        else:
            selector = f"jobset.sigs.k8s.io/jobset-name={name}"
            statuses = [
                j.status
                for j in batch.list_namespaced_job(result["namespace"], label_selector=selector).items
            ]
        starts = [s.start_time for s in statuses if s.start_time]
        ends = [s.completion_time for s in statuses if s.completion_time]
        if not starts or len(ends) < len(statuses):
            return 0.0
        return float((max(ends) - min(starts)).total_seconds())
    finally:
        api.close()


def collect(rest: AirflowRest, dag_id: str, run_id: str, services: Any) -> dict[str, Any]:
    summary = _airflow_rows(rest, dag_id, run_id)
    xcoms = summary["xcoms"]
    training_task = next(
        (k for k, v in xcoms.items() if k.startswith("fine_tune") and isinstance(v, dict)), None
    )
    training = xcoms.get(training_task) if training_task else None
    if training_task:
        from airflow_k8s_ml.plugin_paths import training_path

        summary["training_tab"] = training_path(dag_id, run_id, training_task, root=rest.base_url)
    gate = xcoms.get("checkpoint_gate")
    deploy = xcoms.get("deploy_model")
    batch = xcoms.get("batch_inference")
    summary.update(training=training, gate=gate, deploy=deploy, batch=batch)
    problems: list[str] = []
    if gate:
        try:
            summary["history"] = _history(gate["uri"], services.s3_env, services.s3_endpoint)
        except (K8sMLError, OSError, KeyError) as exc:
            problems.append(f"history: {exc}")
    if deploy:
        try:
            summary["prediction"] = _predict(services.kubeconfig, deploy)
        except Exception as exc:  # the report must not hide the run's outcome behind a reporting error
            problems.append(f"prediction: {exc}")
    if batch and (batch.get("manual_job") or {}).get("output_uri"):
        output = batch["manual_job"]["output_uri"].rstrip("/") + "/_SUMMARY.json"
        summary["batch_summary_uri"] = output
        summary["batch_summary"] = _s3_json(output, services.s3_env, services.s3_endpoint)
    if isinstance(training, dict):
        summary["training_seconds"] = _workload_seconds(services.kubeconfig, training)
    jobs = summary.get("training_seconds", 0.0) + sum(
        _workload_seconds(services.kubeconfig, x)
        for x in ((batch or {}).get("manual_job"),)
        if isinstance(x, dict)
    )
    rollout = _rollout_seconds(services.kubeconfig, deploy) if deploy else 0.0
    summary["rollout_seconds"] = rollout
    summary["workload_seconds"] = jobs + rollout
    if summary.get("run_start") and summary.get("run_end"):
        # The DAG run itself, as Airflow recorded it (not the components' start-up).
        summary["wall_seconds"] = summary["run_end"] - summary["run_start"]
    summary["problems"] = problems
    return summary


def _phase(state: Any) -> Any:
    return state.get("phase") if isinstance(state, dict) else state


def render(summary: dict[str, Any]) -> str:
    lines = [
        "",
        "=== nightly_finetune on the embedded local cluster, under Airflow's scheduler and triggerer ===",
        f"DAG run {summary.get('run_id')} (logical date {summary.get('logical_date')}): "
        f"{summary.get('state')}",
    ]
    gate = summary.get("gate") or {}
    if gate:
        metrics = ", ".join(
            f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
            for k, v in sorted((gate.get("metrics") or {}).items())
        )
        lines += [f"checkpoint: {gate.get('uri')} (step {gate.get('step')})", f"final metrics: {metrics}"]
    training = summary.get("training") or {}
    if training:
        lines.append(
            f"training: {training.get('kind')} {training.get('namespace')}/{training.get('name')} "
            f"{_phase(training.get('state'))} in {float(summary.get('training_seconds') or 0):.1f}s "
            f"(attempts {training.get('attempts')}, resumed from {training.get('resumed_from')})"
        )
        if training.get("admitted_at"):  # queued (``queue`` Param): when Kueue admitted it
            lines.append(f"training admitted by Kueue at {training['admitted_at']}")
    if summary.get("training_tab"):
        lines.append(f"training curve in the Airflow UI (Training tab): {summary['training_tab']}")
    deploy = summary.get("deploy") or {}
    if deploy:
        lines.append(
            f"deployment: {deploy.get('namespace')}/{deploy.get('deployment')} revision "
            f"{deploy.get('revision')} serving {deploy.get('model_uri')}"
        )
    prediction = summary.get("prediction")
    if prediction:
        lines.append(
            f"prediction via service proxy {prediction.get('path')}: {prediction.get('predictions')} "
            f"(expected {prediction.get('expected')})"
        )
    if summary.get("batch_summary_uri"):
        batch_summary = summary.get("batch_summary") or {}
        lines.append(
            f"batch predictions: {summary['batch_summary_uri']} ({batch_summary.get('count', '?')} rows)"
        )
    lines.append("per task: wall time = on a worker + deferred in the triggerer")
    for task in summary.get("tasks", []):
        duration = (task["end"] - task["start"]) if task["start"] and task["end"] else 0.0
        lines.append(
            f"  {task['task_id']:<28} {task['state']:<10} {duration:6.1f}s = "
            f"{task.get('worker_seconds', 0.0):5.1f}s worker + {task.get('deferred_seconds', 0.0):5.1f}s "
            f"deferred  (try {task['try_number']})"
        )
    wall = float(summary.get("wall_seconds") or 0)
    workloads = float(summary.get("workload_seconds") or 0)
    if wall:
        overhead = wall - workloads
        lines.append(
            f"DAG run wall time {wall:.1f}s; workloads' own run time {workloads:.1f}s (training and batch "
            f"Jobs start to completion, plus {float(summary.get('rollout_seconds') or 0):.1f}s serving "
            f"rollout); orchestration overhead {overhead:.1f}s = {100 * overhead / wall:.0f}% of wall time"
        )
        if workloads:
            lines.append(f"DAG wall time / workloads' run time = {wall / workloads:.2f}x")
    for problem in summary.get("problems", []):
        lines.append(f"note: {problem}")
    return "\n".join(lines) + "\n"


def draw_training_curve(summary: dict[str, Any], path: Path) -> None:
    history = summary.get("history") or []
    if not history:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [h.get("epoch") for h in history]
    fig, loss_axis = plt.subplots(figsize=(7, 4), dpi=100)
    loss_axis.plot(epochs, [h.get("train_loss") for h in history], "o-", label="train loss")
    loss_axis.plot(epochs, [h.get("val_loss") for h in history], "s--", label="validation loss")
    loss_axis.set_xlabel("epoch")
    loss_axis.set_ylabel("loss")
    accuracy_axis = loss_axis.twinx()
    accuracy_axis.plot(
        epochs, [h.get("val_accuracy") for h in history], "^-", color="tab:green", label="validation accuracy"
    )
    accuracy_axis.set_ylabel("accuracy")
    accuracy_axis.set_ylim(0, 1)
    handles = loss_axis.get_legend_handles_labels()[0] + accuracy_axis.get_legend_handles_labels()[0]
    labels = loss_axis.get_legend_handles_labels()[1] + accuracy_axis.get_legend_handles_labels()[1]
    loss_axis.legend(handles, labels, loc="center right")
    gate = summary.get("gate") or {}
    loss_axis.set_title(f"nightly fine-tune: {gate.get('uri', '')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
