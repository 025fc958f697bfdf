"""Where a deploy's time goes: the nightly DAG's ``deploy_model`` task, phase by phase, on the local cluster.

Runs the task exactly as it is defined in ``dags/nightly_finetune.py`` (Deployment + Service + HPA + PDB,
two replicas, S3 model, smoke test) against the embedded local cluster and S3 with *real* timings (probe
periods, grace periods and resyncs as in ``make demo``, not the tests' shrunk ones). Four scenarios, in one
run, side by side at the end:

- ``first``: nothing exists yet (create everything, two pods start side by side);
- ``unchanged``: the next run deploys the same model: no write, no rollout (target: 0 writes, under 1 s);
- ``new-model``: a new model URI (a rolling update: with ``maxSurge=1, maxUnavailable=0`` one pod at a time);
- ``new-model-canary``: another new model with the DAG's canary (``canary_percent`` 34 here; the DAG's
  window, ``--analysis-seconds`` to shorten it) while a client POSTs a prediction through the Service every
  100 ms (the canary is judged on that traffic): canary rollout, analysis, promotion (the stable rollout),
  the canary removed.

The operator runs the way Airflow runs it (``execute`` -> ``TaskDeferred`` -> the trigger revived from its
serialized form -> ``execute_complete``), in this process; the Airflow round trips of a real deferral
(triggerer pick-up, scheduler, worker start) are not included: they are the same for every deferrable task.

Printed per scenario: the operator phases (apply, rollout wait, smoke test), the pod milestones seen through
a watch (created, container running, ``serve`` listening, model loaded, Ready, old pods gone), and the API
requests the task sent by verb (from the cluster's ``/metrics``; writes are POST/PATCH/PUT/DELETE).

    python bench/deploy_phases.py [--runs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

from airflow_k8s_ml.testbed.service_traffic import ServiceTraffic

DAG_FILE = Path(__file__).resolve().parents[1] / "dags" / "nightly_finetune.py"
NAMESPACE = "ml"
WRITES = ("POST", "PATCH", "PUT", "DELETE")


@dataclass
class Timeline:
    """Seconds since the scenario's start at which things happened."""

    start: float = field(default_factory=time.monotonic)
    wall_start: float = field(default_factory=time.time)
    marks: list[tuple[float, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def mark(self, what: str) -> None:
        with self.lock:
            self.marks.append((time.monotonic() - self.start, what))


class PodWatch:
    """Pod milestones in ``ml`` through a watch (a thread): created, running, ready, deleting, gone."""

    def __init__(self, kubeconfig: Path, timeline: Timeline) -> None:
        from kubernetes import client, config

        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.timeline = timeline
        self.seen: dict[str, set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _note(self, pod: str, what: str) -> None:
        done = self.seen.setdefault(pod, set())
        if what not in done:
            done.add(what)
            self.timeline.mark(f"pod {pod}: {what}")

    def _run(self) -> None:
        from kubernetes import watch

        rv = self.core.list_namespaced_pod(NAMESPACE).metadata.resource_version
        while not self._stop.is_set():
            stream = watch.Watch()
            for event in stream.stream(
                self.core.list_namespaced_pod, NAMESPACE, resource_version=rv, timeout_seconds=1
            ):
                pod = event["object"]
                rv = pod.metadata.resource_version
                name = pod.metadata.name.rsplit("-", 1)[-1]
                if event["type"] == "ADDED":
                    self._note(name, "created")
                if event["type"] == "DELETED":
                    self._note(name, "gone")
                    continue
                if pod.metadata.deletion_timestamp:
                    self._note(name, "terminating")
                for status in pod.status.container_statuses or []:
                    if status.state and status.state.running:
                        self._note(name, "container running")
                for cond in pod.status.conditions or []:
                    if cond.type == "Ready" and cond.status == "True":
                        self._note(name, "Ready")
                if self._stop.is_set():
                    stream.stop()

    def __enter__(self) -> PodWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        try:
            self._server_milestones()
        finally:
            self.api.close()

    def _server_milestones(self) -> None:
        """When each new pod's ``serve`` bound its socket and finished loading the model (its own log)."""
        from datetime import datetime

        for pod in self.core.list_namespaced_pod(NAMESPACE).items:
            name = pod.metadata.name.rsplit("-", 1)[-1]
            if "created" not in self.seen.get(name, set()):
                continue
            response = self.core.read_namespaced_pod_log(
                pod.metadata.name, NAMESPACE, timestamps=True, _preload_content=False
            )
            text = response.data.decode("utf-8", "replace")
            for line in text.splitlines():
                stamp, _, message = line.partition(" ")
                if message.startswith(("serve listening", "ready model_uri")):
                    stamp = re.sub(r"(\.\d{6})\d*", r"\1", stamp.replace("Z", "+00:00"))  # ns -> us
                    at = datetime.fromisoformat(stamp).timestamp()
                    what = "serve listening" if message.startswith("serve") else message.split(" ")[-1]
                    with self.timeline.lock:
                        self.timeline.marks.append((at - self.timeline.wall_start, f"pod {name}: {what}"))


class Capture(logging.Handler):
    """The task's (and trigger's) log lines, timestamped on the scenario's timeline."""

    def __init__(self, timeline: Timeline) -> None:
        super().__init__(logging.INFO)
        self.timeline = timeline
        self.lines: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((time.monotonic() - self.timeline.start, record.getMessage()))


def request_counts(kubeconfig: Path) -> Counter[str]:
    """``apiserver_request_total`` summed by verb (the cluster's controllers do not go through HTTP)."""
    from airflow_k8s_ml.kube.sync_client import KubeClient

    client = KubeClient("kubernetes_default")
    try:
        text = client.get_raw("/metrics").decode()
    finally:
        client.close()
    counts: Counter[str] = Counter()
    series = r'apiserver_request_total\{verb="(\w+)",resource="([^"]*)",code="\d+"(?:,dry_run="All")?\} (\d+)'
    for verb, resource, n in re.findall(series, text):
        if resource in {"deployments", "services", "horizontalpodautoscalers", "poddisruptionbudgets"}:
            counts[verb] += int(n)
    return counts


def run_operator(op: Any, ctx: dict[str, Any], timeline: Timeline) -> Any:
    """``execute``, then each deferral's trigger to its event and the deferred method, until a result."""
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_k8s_ml.kube.async_client import close_all

    async def first_event(trigger: Any) -> dict[str, Any]:
        try:
            async for event in trigger.run():
                return dict(event.payload)
            raise RuntimeError("trigger ended without an event")
        finally:
            await close_all()

    timeline.mark("task: execute")
    try:
        result = op.execute(ctx)
        timeline.mark("task: done (no deferral)")
        return result
    except TaskDeferred as exc:
        deferred = exc
    while True:
        timeline.mark(f"task: deferred ({type(deferred.trigger).__name__})")
        _, kwargs = deferred.trigger.serialize()
        trigger = type(deferred.trigger)(**kwargs)
        trigger._log = logging.getLogger("bench.trigger")  # stdlib, so the bench can timestamp its lines
        payload = asyncio.run(first_event(trigger))
        timeline.mark(f"trigger: {payload.get('outcome') or payload.get('decision')}")
        try:
            result = getattr(op, deferred.method_name)(ctx, event=payload, **(deferred.kwargs or {}))
        except TaskDeferred as again:
            deferred = again
            continue
        timeline.mark("task: done")
        return result


def context(run_id: str) -> dict[str, Any]:
    from types import SimpleNamespace

    ti = SimpleNamespace(
        dag_id="nightly_finetune", task_id="deploy_model", run_id=run_id, map_index=-1, try_number=1
    )
    ti.xcom_push = lambda key, value: None
    return {"ti": ti}


def deploy_task(model_uri: str, max_surge: str | None = None, canary: dict[str, Any] | None = None) -> Any:
    """The DAG's own ``deploy_model`` task, its model URI rendered (the gate's XCom in a real run), its
    Params rendered as a run would (``autoscale_metric`` cpu; ``canary_percent`` 0 unless ``canary``)."""
    import copy

    from airflow.sdk.definitions.dag import DAG  # noqa: F401  (imports the SDK before the DAG file)

    namespace: dict[str, Any] = {}
    exec(compile(DAG_FILE.read_text(), str(DAG_FILE), "exec"), namespace)
    task = copy.copy(namespace["dag"].get_task("deploy_model"))
    task.model_uri = model_uri
    task.autoscaling = {**task.autoscaling, "autoscale_metric": "cpu"}
    task.canary = {**task.canary, **canary} if canary else None
    if max_surge is not None:
        task.deployment_options = {**(task.deployment_options or {}), "max_surge": max_surge}
    return task


def pod_phases(timeline: Timeline) -> dict[str, dict[str, float]]:
    """Per pod created in the scenario: created -> running, running -> model loaded, loaded -> Ready."""
    seen: dict[str, dict[str, float]] = {}
    for t, what in timeline.marks:
        if what.startswith("pod "):
            pod, _, milestone = what[4:].partition(": ")
            seen.setdefault(pod, {}).setdefault(
                "loaded" if milestone.startswith("seconds=") else milestone, t
            )
    out = {}
    for pod, at in seen.items():
        if {"created", "container running", "loaded", "Ready"} <= set(at):
            out[pod] = {
                "start": round(at["container running"] - at["created"], 2),
                "model_load": round(at["loaded"] - at["container running"], 2),
                "ready_after_load": round(at["Ready"] - at["loaded"], 2),
            }
    return out


def print_scenario(name: str, timeline: Timeline, capture: Capture, writes: Counter[str]) -> None:
    print(f"\n== {name} ==")
    events = sorted(timeline.marks + [(t, f"  log: {line}") for t, line in capture.lines])
    for t, what in events:
        print(f"{t:7.2f}s  {what}")
    verbs = ", ".join(f"{verb} {n}" for verb, n in sorted(writes.items())) or "none"
    print(f"requests on deployments/services/hpa/pdb by verb: {verbs}")
    print(f"writes: {sum(n for verb, n in writes.items() if verb in WRITES)}")


@contextlib.contextmanager
def services(state: Path) -> Iterator[Any]:
    from airflow_k8s_ml.testbed import demo

    with demo.embedded_services(state) as running:
        demo.prepare_cluster(running)
        demo.seed(running, state / "seed.log")
        yield running


def copy_model(running: Any, source: str, target: str) -> None:
    """Model B: the same checkpoint under another prefix (a new URI is what rolls the pods)."""
    s3 = running.s3.client()
    bucket = "ml-models"
    for item in s3.list_objects_v2(Bucket=bucket, Prefix=source)["Contents"]:
        key = item["Key"]
        s3.copy_object(
            Bucket=bucket, Key=target + key[len(source) :], CopySource={"Bucket": bucket, "Key": key}
        )


def canary_phases(capture: Capture, start: float, done: float) -> dict[str, float]:
    """Canary rollout + smoke (to the analysis), the analysis, the promotion (stable rollout, canary gone)."""
    opened = next(t for t, line in capture.lines if line.startswith("canary analysis"))
    decided = next(t for t, line in capture.lines if line.startswith("canary of model"))
    return {"canary_rollout": opened - start, "analysis": decided - opened, "promotion": done - decided}


def scenario(
    name: str,
    kubeconfig: Path,
    model_uri: str,
    run_id: str,
    results: dict[str, Any],
    max_surge: str | None = None,
    canary: dict[str, Any] | None = None,
) -> None:
    op = deploy_task(model_uri, max_surge, canary)
    timeline = Timeline()
    capture = Capture(timeline)
    op._cached_logger = logging.getLogger("bench.task")  # stdlib instead of structlog: timestamped here
    loggers = [logging.getLogger("bench")]
    for logger in loggers:
        logger.addHandler(capture)
        logger.setLevel(logging.INFO)
    before = request_counts(kubeconfig)
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(kubeconfig))
    # one caller, every 100 ms: the canary's traffic
    traffic = ServiceTraffic(
        api, NAMESPACE, "digits:http", "predict", body={"instances": [[0.0] * 64]}, callers=1
    )
    try:
        with PodWatch(kubeconfig, timeline), traffic if canary else contextlib.nullcontext():
            out = run_operator(op, context(run_id), timeline)
            time.sleep(0.5)  # let the watch report the last milestones
    finally:
        api.close()
        for logger in loggers:
            logger.removeHandler(capture)
    after = request_counts(kubeconfig)
    after.subtract(before)
    writes = Counter({verb: n for verb, n in after.items() if n > 0})
    print_scenario(name, timeline, capture, writes)
    at = {what: t for t, what in timeline.marks if what.startswith(("task:", "trigger:"))}
    start = at["task: execute"]
    done = next(t for what, t in at.items() if what.startswith("task: done"))
    deferred = next((t for what, t in at.items() if what.startswith("task: deferred")), done)
    event = next((t for what, t in at.items() if what.startswith("trigger:")), deferred)
    phases = {
        "apply": deferred - start,  # execute up to the deferral (or the whole task when it did not defer)
        "rollout_wait": event - deferred,
        "after_rollout": done - event,  # execute_complete: the smoke test
        "total": done - start,
    }
    if canary:
        phases = {**canary_phases(capture, start, done), "total": done - start}
        print(f"client through the Service: {dict(traffic.statuses)} (HTTP status: calls)")
    pods = pod_phases(timeline)
    for pod, figures in pods.items():
        print(f"pod {pod}: " + ", ".join(f"{k} {v:.2f}s" for k, v in figures.items()))
    results[name] = {
        **{f"{phase}_seconds": round(value, 2) for phase, value in phases.items()},
        "pods": pods,
        "writes": sum(n for verb, n in writes.items() if verb in WRITES),
        "changes": out["changes"],
        "revision": out["revision"],
        **({"canary": out["canary"], "client": dict(traffic.statuses)} if canary else {}),
    }
    print(" ".join(f"{phase} {value:.2f}s" for phase, value in phases.items()))
    print(f"changes: {out['changes']}  revision: {out['revision']}")


def print_side_by_side(results: dict[str, Any]) -> None:
    """One table: each scenario's total, writes and phases, measured in this run."""
    print(f"\n{'scenario':<18}{'total s':>9}{'writes':>8}  phases (s)")
    for name, figures in results.items():
        phases = {k[: -len("_seconds")]: v for k, v in figures.items() if k.endswith("_seconds")}
        total = phases.pop("total")
        shown = ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
        print(f"{name:<18}{total:>9.2f}{figures['writes']:>8}  {shown}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--json", help="also write the totals to this file")
    parser.add_argument("--max-surge", help="deployment_options.max_surge for every scenario (e.g. 100%%)")
    parser.add_argument(
        "--analysis-seconds", type=float, help="the canary's analysis window (default: the DAG's)"
    )
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="deploy-bench-") as tmp:
        with services(Path(tmp)) as running:
            conn = {"kube_config_path": str(running.kubeconfig), "namespace": NAMESPACE}
            os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
                {"conn_type": "kubernetes", "extra": conn}
            )
            copy_model(running, "base-model/step-1/", "candidates/b/step-1/")
            copy_model(running, "base-model/step-1/", "candidates/c/step-1/")
            model_a = "s3://ml-models/base-model/step-1/"
            model_b = "s3://ml-models/candidates/b/step-1/"
            model_c = "s3://ml-models/candidates/c/step-1/"
            canary: dict[str, Any] = {"percent": 34}
            if args.analysis_seconds:
                canary["analysis_seconds"] = args.analysis_seconds
            kube = running.kubeconfig
            scenario("first", kube, model_a, "manual__run-1", results, args.max_surge)
            scenario("unchanged", kube, model_a, "manual__run-2", results, args.max_surge)
            scenario("new-model", kube, model_b, "manual__run-3", results, args.max_surge)
            scenario("new-model-canary", kube, model_c, "manual__run-4", results, args.max_surge, canary)
    print("\n" + json.dumps(results, indent=1))
    print_side_by_side(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
