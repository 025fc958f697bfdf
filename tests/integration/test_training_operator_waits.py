"""FineTuneJobOperator's deferral across failures, on the local cluster with the real trigger.

- a worker that dies after creating the Job and before deferring: the retry adopts the Job and its task
  log holds every training line exactly once, the finish not printing relayed lines again;
- ``execution_timeout`` becomes the deferral's timeout (Airflow 3.3 does not enforce it while deferred),
  and its expiry - the ``TaskDeferralTimeout`` Airflow raises on resume - deletes the Job and fails with a
  message saying why.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from airflow_k8s_ml.errors import WorkloadFailed
from tests.cluster_fixtures import wait_for

from .training_helpers import execute_until_deferred, finetune, jobs, make_context, pods, resume

pytestmark = pytest.mark.usefixtures("kube_conn")

FAILING_TRAINER = (
    "import sys, time\n"
    "for i in range(12):\n"
    "    print(f'epoch={i + 1}/12', flush=True); time.sleep(0.05)\n"
    "sys.exit(3)"
)


def test_retry_after_a_crash_before_deferring_logs_every_line_once(
    batch: Any, namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    context = make_context("crashy")
    execute_until_deferred(finetune("crashy", namespace, FAILING_TRAINER), context)
    capfd.readouterr()  # try 1's worker dies here: the Job runs, nobody relays its log
    [created] = jobs(batch, namespace)

    retry = finetune("crashy", namespace, FAILING_TRAINER)
    context = make_context("crashy", store=context["task_state_store"], try_number=2)
    deferred = execute_until_deferred(retry, context)
    assert deferred.trigger.try_number == 2 and deferred.trigger.log_cursor is None
    with pytest.raises(WorkloadFailed, match="exit code 3"):
        resume(retry, deferred, context)

    log = capfd.readouterr().out
    assert "adopting active Job" in log
    [adopted] = jobs(batch, namespace)
    assert adopted.metadata.uid == created.metadata.uid
    epochs = Counter(re.findall(r"epoch=\d+/12", log))
    assert epochs == Counter({f"epoch={i}/12": 1 for i in range(1, 13)}), log  # relayed, not re-printed
    assert "(its last lines are in the log above)" in log


def test_execution_timeout_is_the_deferral_timeout_and_its_expiry_deletes_the_job(
    batch: Any, core: Any, namespace: str
) -> None:
    op = finetune(
        "bounded", namespace, "import time; time.sleep(120)", execution_timeout=timedelta(minutes=5)
    )
    context = make_context("bounded")
    deferred = execute_until_deferred(op, context)
    assert isinstance(deferred.timeout, timedelta)
    assert timedelta(minutes=4) < deferred.timeout <= timedelta(minutes=5)
    [job] = jobs(batch, namespace)

    from airflow.sdk.exceptions import AirflowTaskTimeout

    # What the worker runs once the scheduler's check_trigger_timeouts has fired for this deferral.
    with pytest.raises(AirflowTaskTimeout) as info:
        op.resume_execution("__fail__", {"error": "Trigger timeout"}, context)
    name = f"{namespace}/{job.metadata.name}"
    assert str(info.value).startswith(
        "execution_timeout 0:05:00 exceeded while waiting in the triggerer for Job"
    )
    assert str(info.value).endswith("; deleted it") and name in str(info.value)
    wait_for(lambda: not jobs(batch, namespace) and not pods(core, namespace), timeout=30)


def test_no_execution_timeout_no_deferral_timeout(namespace: str) -> None:
    op = finetune("unbounded", namespace, "import time; time.sleep(60)")
    deferred = execute_until_deferred(op, make_context("unbounded"))
    assert deferred.timeout is None
