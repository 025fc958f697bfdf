"""FineTuneJobOperator against the local cluster: the task's whole life (execute -> defer -> trigger ->
execute_complete) with real Jobs, real pods and the real trigger; no mocks.

Covers: success XCom; BackoffLimitExceeded and Kubernetes-side DeadlineExceeded in the failure message;
Airflow-side run and admission deadlines (workload deleted, no pods left); a worker crash (the retry adopts
the same Job); success and failure before a retry (return without relaunch / attempt 2 resumes from the
newest complete checkpoint); kill while deferred and while polling; the raw-manifest escape hatch; and bad
rendered input (a clear ValidationError naming the field, nothing created).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.errors import DeadlineExceeded, TaskKilled, ValidationError, WorkloadFailed
from airflow_k8s_ml.operators import FineTuneJobOperator
from airflow_k8s_ml.operators._adopt import STATE_KEY
from tests.cluster_fixtures import sigterm_when, wait_for

from .training_helpers import (
    DictTaskStateStore,
    execute_until_deferred,
    finetune,
    first_event,
    jobs,
    make_context,
    pods,
    py,
    resume,
    revive,
    run_async,
    run_task,
    task_log,
)

REPO = Path(__file__).resolve().parents[2]


#: Every test runs with ``kubernetes_default`` pointing at the shared test cluster.
pytestmark = pytest.mark.usefixtures("kube_conn")


def running_pod(core: Any, namespace: str) -> Any:
    return next((p for p in pods(core, namespace) if p.status.phase == "Running"), None)


# -- success and failures ---------------------------------------------------------------------------------


def test_success_returns_the_workload_result(batch: Any, core: Any, namespace: str) -> None:
    op = finetune("train", namespace, "print('epoch 1 loss 0.3'); print('done')", labels={"team": "ml"})
    context = make_context("train")
    result = run_task(op, context)

    [job] = jobs(batch, namespace)
    assert result["kind"] == "Job" and result["namespace"] == namespace
    assert (result["name"], result["uid"]) == (job.metadata.name, job.metadata.uid)
    assert result["name"].startswith("training-train-") and result["name"].endswith("-a1")
    assert result["state"]["phase"] == "succeeded" and result["reason"] == "CompletionsReached"
    assert result["attempts"] == 1 and result["resumed_from"] is None
    assert result["started_at"] and result["finished_at"] and result["duration_seconds"] >= 0
    labels = job.metadata.labels
    assert labels["airflow-k8s-ml/task-id"] == "train" and labels["airflow-k8s-ml/attempt"] == "1"
    assert labels["team"] == "ml"
    assert job.spec.template.spec.security_context.run_as_non_root is True
    assert context["task_state_store"].get(STATE_KEY)["result"] == result  # cached for a retry


def test_backoff_limit_exceeded_names_the_pod_exit_code_and_last_line(batch: Any, namespace: str) -> None:
    op = finetune("crash", namespace, "import sys; print('loss exploded: nan'); sys.exit(3)")
    with pytest.raises(WorkloadFailed) as info:
        run_task(op, make_context("crash"))
    message = str(info.value)
    assert message.startswith(f"Job {namespace}/training-crash-")
    assert "BackoffLimitExceeded" in message and "Job has reached the specified backoff limit" in message
    assert "exit code 3" in message and "loss exploded: nan" in message
    assert len(jobs(batch, namespace)) == 1  # on_finish="keep": left for debugging


def test_kubernetes_side_deadline_exceeded_is_the_failure_reason(batch: Any, namespace: str) -> None:
    op = finetune("slow", namespace, "import time; time.sleep(30)", active_deadline_seconds=1)
    with pytest.raises(WorkloadFailed) as info:
        run_task(op, make_context("slow"))
    assert "DeadlineExceeded" in str(info.value)
    assert "active longer than specified deadline" in str(info.value)
    [job] = jobs(batch, namespace)
    assert job.spec.active_deadline_seconds == 1


def test_failure_with_on_finish_delete_logs_then_deletes(batch: Any, namespace: str, capsys: Any) -> None:
    op = finetune("gone", namespace, "import sys; print('bad batch 17'); sys.exit(2)", on_finish="delete")
    with pytest.raises(WorkloadFailed, match="exit code 2"):
        run_task(op, make_context("gone"))
    assert jobs(batch, namespace) == []
    assert "bad batch 17" in task_log(capsys)  # the diagnostics reached the task log first


# -- Airflow-side deadlines -------------------------------------------------------------------------------


def test_run_deadline_deletes_the_job_and_leaves_no_pods(
    batch: Any, core: Any, namespace: str, capsys: Any
) -> None:
    code = "import time; print('epoch 1 of 100', flush=True); time.sleep(120)"
    op = finetune("stuck", namespace, code, run_timeout=1)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as info:
        run_task(op, make_context("stuck"))
    assert info.value.deadline == "run_timeout"
    assert str(info.value).startswith("run_timeout 1s exceeded")
    took = time.monotonic() - started
    assert took < 60, f"run_timeout 1s ended the task only after {took:.1f} s (a hang; figures: bench/)"
    assert jobs(batch, namespace) == [] and pods(core, namespace) == []
    assert "epoch 1 of 100" in task_log(capsys)  # the last lines were logged before the deletion


def test_admission_deadline_reports_the_schedulers_message(batch: Any, core: Any, namespace: str) -> None:
    op = finetune("gpu", namespace, "print('never runs')", gpus=1, admission_timeout=1.5)
    with pytest.raises(DeadlineExceeded) as info:
        run_task(op, make_context("gpu"))
    assert info.value.deadline == "admission_timeout"
    assert str(info.value).startswith("admission_timeout 1.5s exceeded: 0/1 nodes are available")
    assert "Insufficient nvidia.com/gpu" in str(info.value)
    assert jobs(batch, namespace) == [] and pods(core, namespace) == []


# -- submit or adopt --------------------------------------------------------------------------------------

CRASHING_WORKER = """
import json, os, sys
sys.path.insert(0, {repo!r})
from tests.integration.training_helpers import DictTaskStateStore, make_context
from airflow_k8s_ml.operators import FineTuneJobOperator

op = FineTuneJobOperator(task_id="crashy", namespace={namespace!r}, image="python:3.11",
                         command={command!r}, deferrable=False, poll_interval=0.2)
store = DictTaskStateStore({store!r})
op.execute(make_context("crashy", store=store))
"""


def test_worker_crash_then_retry_adopts_the_same_job(
    batch: Any, core: Any, namespace: str, tmp_path: Path
) -> None:
    store_file = tmp_path / "task_state_store.json"
    command = py("import time; print('step', flush=True); time.sleep(4); print('done')")
    script = CRASHING_WORKER.format(
        repo=str(REPO), namespace=namespace, command=command, store=str(store_file)
    )
    worker = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=dict(os.environ))
    try:
        wait_for(lambda: worker.poll() is not None or running_pod(core, namespace), timeout=60)
        assert worker.poll() is None, "the worker died on its own"
        wait_for(store_file.exists)
    finally:
        worker.send_signal(signal.SIGKILL)  # the worker dies; the Job keeps running
        worker.wait()
    [before] = jobs(batch, namespace)
    store = DictTaskStateStore(store_file)
    assert store.get(STATE_KEY)["uid"] == before.metadata.uid

    retry = FineTuneJobOperator(task_id="crashy", namespace=namespace, image="python:3.11", command=command)
    result = run_task(retry, make_context("crashy", store=store, try_number=2))

    [after] = jobs(batch, namespace)  # exactly one Job, the same one
    assert after.metadata.uid == before.metadata.uid == result["uid"]
    assert result["state"]["phase"] == "succeeded" and result["attempts"] == 1


def test_without_task_state_store_the_labels_find_the_active_job(batch: Any, namespace: str) -> None:
    code = "import time; time.sleep(2); print('done')"
    first = execute_until_deferred(finetune("lbl", namespace, code), make_context("lbl"))
    retry = finetune("lbl", namespace, code)
    context = make_context("lbl", try_number=2)  # a fresh, empty store: only the labels remember
    second = execute_until_deferred(retry, context)
    assert second.trigger.uid == first.trigger.uid
    assert len(jobs(batch, namespace)) == 1
    assert resume(retry, second, context)["uid"] == first.trigger.uid


def test_success_before_retry_returns_the_result_without_relaunching(batch: Any, namespace: str) -> None:
    code = "print('done')"
    context = make_context("once")
    first = run_task(finetune("once", namespace, code), context)
    again = run_task(
        finetune("once", namespace, code), make_context("once", store=context["task_state_store"])
    )
    assert again == first
    # The same from the labels alone (store lost): the result is rebuilt from the object.
    rebuilt = run_task(finetune("once", namespace, code), make_context("once"))
    assert (rebuilt["uid"], rebuilt["attempts"], rebuilt["state"]["phase"]) == (first["uid"], 1, "succeeded")
    assert len(jobs(batch, namespace)) == 1


WRITER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from airflow_k8s_ml.checkpoints.writer import CheckpointWriter

    base, resume = os.environ["CHECKPOINT_URI"], sys.argv[1]
    print(f"RESUME_FROM env={os.environ.get('RESUME_FROM', '')!r} arg={resume!r}", flush=True)
    writer = CheckpointWriter(base)
    if not resume:
        for step in (1, 2):
            writer.commit(step, {"weights.bin": b"w" * step}, metrics={"loss": 1.0 / step})
        partial = Path(base.removeprefix("file://")) / "step-3"
        partial.mkdir(parents=True)
        (partial / "weights.bin").write_bytes(b"half")  # no MANIFEST.json: incomplete
        print("preempted after step 2", flush=True)
        sys.exit(1)
    print(f"resumed from {resume}", flush=True)
    writer.commit(4, {"weights.bin": b"final"}, metrics={"loss": 0.1})
    """
)


def test_failure_before_retry_launches_attempt_2_resuming_from_newest_complete_checkpoint(
    batch: Any, core: Any, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    base = f"file://{tmp_path}/ckpt"

    def operator() -> FineTuneJobOperator:
        return FineTuneJobOperator(
            task_id="resumable",
            namespace=namespace,
            image="python:3.11",
            command=["python", "-c", WRITER],
            args=["{{ resume_from }}"],
            resume_from="latest",
            checkpoint_uri=base,
        )

    context = make_context("resumable")
    with pytest.raises(WorkloadFailed, match="preempted after step 2"):
        run_task(operator(), context)
    assert "no complete checkpoint under" in task_log(capsys)

    result = run_task(operator(), make_context("resumable", store=context["task_state_store"], try_number=2))

    step2 = f"{base}/step-2/"
    assert result["attempts"] == 2 and result["resumed_from"] == step2
    assert result["name"].endswith("-a2")
    assert f"resuming from {step2}" in task_log(capsys)
    names = sorted(j.metadata.name for j in jobs(batch, namespace))
    assert [n[-3:] for n in names] == ["-a1", "-a2"]
    [pod] = [p for p in pods(core, namespace) if p.metadata.labels["airflow-k8s-ml/attempt"] == "2"]
    log = core.read_namespaced_pod_log(pod.metadata.name, namespace)
    assert f"RESUME_FROM env={step2!r} arg={step2!r}" in log and f"resumed from {step2}" in log


# -- kill -------------------------------------------------------------------------------------------------


def test_kill_while_deferred_deletes_the_job(batch: Any, core: Any, namespace: str) -> None:
    op = finetune("killme", namespace, "import time; print('up', flush=True); time.sleep(120)")
    deferred = execute_until_deferred(op, make_context("killme"))

    async def kill_while_waiting() -> None:
        trigger = revive(deferred.trigger)
        waiting = asyncio.create_task(first_event(trigger))
        deadline = time.monotonic() + 60
        while running_pod(core, namespace) is None:
            assert not waiting.done(), f"the trigger ended before the pod ran: {waiting!r}"
            assert time.monotonic() < deadline, "no pod of Job killme running after 60 s"
            await asyncio.sleep(0.1)
        waiting.cancel()  # what the triggerer does when the user marks the task failed ...
        await asyncio.gather(waiting, return_exceptions=True)
        await trigger.on_kill()  # ... then asks the trigger to stop the external work

    run_async(kill_while_waiting())
    wait_for(lambda: not jobs(batch, namespace) and not pods(core, namespace), timeout=30)


def test_on_kill_while_polling_deletes_the_job_and_says_so(batch: Any, core: Any, namespace: str) -> None:
    """A kill while the worker polls (Airflow's SIGTERM handler calls ``on_kill``, ``task_runner._on_term``):
    the Job is deleted, the wait ends at once, and the task fails naming the kill, not the state the
    deletion left the Job in (its pods killed first: ``failed (BackoffLimitExceeded)`` on a cluster)."""
    op = finetune("sync", namespace, "import time; time.sleep(120)", deferrable=False, poll_interval=60)
    with (
        sigterm_when(op, lambda: running_pod(core, namespace), "the Job's pod running") as sent,
        pytest.raises(TaskKilled) as info,
    ):
        op.execute(make_context("sync"))
    ended = time.monotonic()
    assert sent, "no SIGTERM was sent"
    message = str(info.value)
    assert (
        message.startswith(f"Job {namespace}/training-sync-")
        and "was deleted by the task's on_kill" in message
    )
    assert "BackoffLimitExceeded" not in message and "deleted while waiting" not in message, message
    # the 60 s poll interval did not hold the kill: the wait ended when on_kill set it going
    assert ended - sent[0] < 30, (
        f"the wait went on {ended - sent[0]:.0f} s after the kill (poll_interval 60 s)"
    )
    wait_for(lambda: not jobs(batch, namespace), timeout=30, what="the killed Job gone")


# -- raw manifest and bad rendered input ------------------------------------------------------------------


def test_raw_manifest_file_is_named_labelled_and_run(batch: Any, namespace: str, tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        textwrap.dedent(
            """
            apiVersion: batch/v1
            kind: Job
            metadata: {name: whatever, labels: {owner: data-team}}
            spec:
              backoffLimit: 0
              template:
                spec:
                  restartPolicy: Never
                  containers:
                    - name: main
                      image: python:3.11
                      command: [python, -c, "print('raw ok')"]
            """
        )
    )
    op = FineTuneJobOperator(task_id="raw", namespace=namespace, manifest=str(manifest))
    result = run_task(op, make_context("raw"))
    [job] = jobs(batch, namespace)
    assert result["name"] == job.metadata.name != "whatever"
    assert job.metadata.labels["owner"] == "data-team"
    assert job.spec.template.metadata.labels["airflow-k8s-ml/task-id"] == "raw"


@pytest.mark.parametrize(
    ("attribute", "rendered", "field"),
    [
        ("image", "python 3.11", "image"),
        ("namespace", "Not_A_Namespace", "namespace"),
        ("command", "python train.py", "command"),
        ("env", {"CHECKPOINT_URI": "s3://b/p"}, "env[CHECKPOINT_URI]"),
        ("resume_from", "ftp://host/ckpt", "resume_from"),
        ("checkpoint_uri", "not a uri", "checkpoint_uri"),
        ("deadline", "tomorrow-ish", "deadline"),
    ],
)
def test_bad_rendered_value_fails_before_any_api_call(
    batch: Any, namespace: str, attribute: str, rendered: Any, field: str
) -> None:
    op = FineTuneJobOperator(
        task_id="bad",
        namespace=namespace,
        image="{{ params.image }}",
        command=py("print(1)"),
        checkpoint_uri="{{ params.base }}",
        resume_from="{{ params.resume }}",
        deadline="{{ params.deadline }}",
    )
    values = {
        "image": "python:3.11",
        "checkpoint_uri": "file:///tmp/x",
        "resume_from": None,
        "deadline": None,
    }
    for name, value in {**values, attribute: rendered}.items():
        setattr(op, name, value)  # what rendering the template fields does
    with pytest.raises(ValidationError) as info:
        op.execute(make_context("bad"))
    assert info.value.field == field
    assert jobs(batch, namespace) == []


# -- TrainingJobSensor ------------------------------------------------------------------------------------


def test_sensor_waits_for_an_existing_job_and_returns_its_result(batch: Any, namespace: str) -> None:
    from airflow_k8s_ml.sensors import TrainingJobSensor

    code = "import time; time.sleep(1); print('done')"
    launched = execute_until_deferred(finetune("ext", namespace, code), make_context("ext"))
    sensor = TrainingJobSensor(task_id="wait", name=launched.trigger.name, namespace=namespace)
    result = run_task(sensor, make_context("wait"))
    assert (result["uid"], result["state"]["phase"], result["attempts"]) == (
        launched.trigger.uid,
        "succeeded",
        1,
    )


def test_sensor_deadline_fails_the_sensor_but_leaves_the_job(batch: Any, namespace: str) -> None:
    from airflow_k8s_ml.sensors import TrainingJobSensor

    execute_until_deferred(finetune("long", namespace, "import time; time.sleep(120)"), make_context("long"))
    [job] = jobs(batch, namespace)
    sensor = TrainingJobSensor(task_id="wait", name=job.metadata.name, namespace=namespace, deadline=1)
    with pytest.raises(DeadlineExceeded, match=r"^deadline 1s exceeded"):
        run_task(sensor, make_context("wait"))
    assert [j.metadata.uid for j in jobs(batch, namespace)] == [
        job.metadata.uid
    ]  # not the sensor's to delete


def test_sensor_polls_in_the_worker_when_not_deferrable(namespace: str) -> None:
    from airflow_k8s_ml.sensors import TrainingJobSensor

    launched = execute_until_deferred(finetune("pk", namespace, "print('ok')"), make_context("pk"))
    sensor = TrainingJobSensor(
        task_id="wait", name=launched.trigger.name, namespace=namespace, deferrable=False, poll_interval=0.2
    )
    assert run_task(sensor, make_context("wait"))["state"]["phase"] == "succeeded"


def test_non_deferrable_mode_polls_with_the_same_outcomes(batch: Any, core: Any, namespace: str) -> None:
    ok = finetune("sync-ok", namespace, "print('fine')", deferrable=False, poll_interval=0.2)
    result = run_task(ok, make_context("sync-ok"))
    assert result["state"]["phase"] == "succeeded"
    late = finetune(
        "sync-late",
        namespace,
        "import time; time.sleep(60)",
        deferrable=False,
        poll_interval=0.2,
        run_timeout=1,
    )
    with pytest.raises(DeadlineExceeded, match="run_timeout 1s exceeded"):
        run_task(late, make_context("sync-late"))
    assert [j.metadata.name for j in jobs(batch, namespace)] == [result["name"]]  # the late one is deleted
