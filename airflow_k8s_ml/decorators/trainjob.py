"""``@task.train_job``: a Python function as a Kubeflow Trainer v2 TrainJob's program, on every node.

The third decorator over the one runner (:mod:`airflow_k8s_ml.decorators.training` says why decorators are
the operators with the function as their program): the decorated task *is*
:class:`~airflow_k8s_ml.operators.trainjob.TrainJobOperator`, so it takes every TrainJob argument
(``runtime``, ``num_nodes``, ``resources_per_node``, the trainer pod's, the deadlines, ``queue_name``,
``checkpoint_uri`` and ``resume_from``) but ``command``, ``args`` and ``manifest``, and refuses what a
TrainJob refuses (``env_from``: use ``secret_env``). Every node calls the function (``PET_NODE_RANK``,
``PET_NNODES`` in its env); the XCom is ``node-0``'s return value.

Named ``train_job`` as ``FineTuneJob`` -> ``finetune_job`` and ``PyTorchJob`` -> ``pytorch_job``. A module of
its own so a DAG that uses only ``@task.finetune_job`` does not import the TrainJob operator at parse time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from airflow.sdk.bases.decorator import TaskDecorator, task_decorator_factory

from airflow_k8s_ml.decorators.training import _decorated, _FunctionWorkloadOperator, _template_fields
from airflow_k8s_ml.operators.trainjob import TRAINJOB, TrainJobOperator

__all__ = ["train_job_task"]


class _TrainJobFunctionOperator(_FunctionWorkloadOperator, TrainJobOperator):
    custom_operator_name = "@task.train_job"
    workload = _decorated(TRAINJOB)
    template_fields: Sequence[str] = _template_fields(TrainJobOperator)


def train_job_task(
    python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """``@task.train_job(...)``: run the function on every node of a TrainJob (``num_nodes``; the
    ``runtime``'s default otherwise); takes every argument of
    :class:`~airflow_k8s_ml.operators.trainjob.TrainJobOperator` but ``command``, ``args`` and ``manifest``;
    the XCom is ``node-0``'s return value."""
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_TrainJobFunctionOperator,
        **kwargs,
    )
