"""Queued (Kueue) training operators against the local cluster.

Without Kueue on the cluster (``workloads.kueue.x-k8s.io`` answers 404) a queued job waits as before:
suspended, under the admission budget, with no word about a queue and no error from the missing resource.
The admission, waiting-line, preemption and deadline-with-Kueue's-reason tests need the cluster side of
issue 14 (Kueue served by the local cluster) and are added with it.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.errors import DeadlineExceeded

from .training_helpers import finetune, jobs, make_context, run_task, task_log

pytestmark = pytest.mark.usefixtures("kube_conn")


@pytest.mark.parametrize("deferrable", [True, False])
def test_queued_job_without_kueue_waits_silently_until_the_admission_deadline(
    batch: Any, namespace: str, capsys: Any, deferrable: bool
) -> None:
    op = finetune(
        "queued",
        namespace,
        "print('never runs')",
        queue_name="gpu",
        admission_timeout=1.5,
        deferrable=deferrable,
    )
    with pytest.raises(DeadlineExceeded) as info:
        run_task(op, make_context("queued"))
    assert info.value.deadline == "admission_timeout"
    assert str(info.value) == "admission_timeout 1.5s exceeded: Job suspended"  # as before Kueue
    log = task_log(capsys)
    assert "waiting for admission in queue" not in log  # no Workload to read: nothing said about a queue
    assert "workloads" not in log and "404" not in log  # the missing Kueue API is not an error
    assert jobs(batch, namespace) == []  # the expired deadline deleted the job
