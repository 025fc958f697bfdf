"""``@task.finetune_job`` and ``@task.pytorch_job``: a Python function as a training Job or a PyTorchJob.

Why decorators over the operators rather than a second runner: the decorated task *is*
:class:`~airflow_k8s_ml.operators.training.FineTuneJobOperator` (or ``PyTorchJobOperator``) with the
function as the container's program, so it takes every argument of the operator (deadlines, resources,
GPUs, ``queue_name``, ``checkpoint_uri`` and ``resume_from``, cleanup; the signature declared once in
``operators/_signature.py``), and submit-or-adopt, resume on retry, the phased deadlines and the failure
report are the runner's. Only the kind's ``result`` (the XCom is the function's return value) and
``collect`` (read it from the pods' termination messages) differ:
:mod:`airflow_k8s_ml.operators._task_function` says how the function travels and why the value comes
back that way.

Three operator arguments are the decorator's own, so passing one is a TypeError saying why: ``command``
and ``args`` (the function is the program; its arguments come from the call) and ``manifest`` (which
replaces the pod). A function parameter named ``resume_from`` or ``checkpoint_uri`` that the call leaves
unset gets the resolved value (the pod's ``RESUME_FROM`` / ``CHECKPOINT_URI``).

As with ``@task.kubernetes``: the function must be self-contained (imports inside it; no closures) and its
arguments and return value JSON-serializable; the image needs Python. Import-light (a DAG parse imports
this module through ``task.finetune_job``): nothing here imports kubernetes, boto3 or torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory

from airflow_k8s_ml.operators._kind import WorkloadKind
from airflow_k8s_ml.operators._task_function import (
    COMMAND,
    check_env_names,
    collect_return_value,
    function_env,
    return_value,
)
from airflow_k8s_ml.operators._workload import _WorkloadOperator
from airflow_k8s_ml.operators.training import (
    FINETUNE_JOB,
    PYTORCHJOB,
    FineTuneJobOperator,
    PyTorchJobOperator,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["finetune_job_task", "pytorch_job_task"]

#: The operator arguments the decorator owns -> why they cannot be passed.
OWN_ARGUMENTS = {
    "command": "the decorated function is the container's program",
    "args": "the function's arguments come from calling it in the DAG",
    "manifest": "a raw manifest replaces the pod the function runs in; use the operator instead",
}


def _decorated(kind: WorkloadKind[Any]) -> WorkloadKind[Any]:
    """The operator's kind, its XCom being the function's return value read from the pods."""
    return kind._replace(result=return_value, collect=collect_return_value)  # type: ignore[no-any-return]


def _template_fields(operator: type[_WorkloadOperator]) -> tuple[str, ...]:
    return (
        *(f for f in operator.template_fields if f not in ("command", "args", "manifest")),
        "op_args",
        "op_kwargs",
    )


class _FunctionWorkloadOperator(DecoratedOperator):
    """The decorated function as a workload's program (mixed before the workload operator it runs as)."""

    custom_operator_name: ClassVar[str]
    # The callable is shipped as source, never mutated: a shallow copy (as the cncf decorator does).
    shallow_copy_attrs: Sequence[str] = ("python_callable",)

    def __init__(self, *, python_callable: Callable[..., Any], **kwargs: Any) -> None:
        for name, why in OWN_ARGUMENTS.items():
            if name in kwargs:
                raise TypeError(
                    f"{self.custom_operator_name} got an unexpected keyword argument {name!r}: {why}"
                )
        check_env_names(kwargs.get("env"))
        super().__init__(python_callable=python_callable, command=list(COMMAND), **kwargs)
        self._shipped: frozenset[str] = frozenset()

    def execute(self, context: Context) -> Any:
        """Put the function and this call's (rendered) arguments into the pod's env, then run as the
        operator does. Before any API call: an argument JSON cannot carry creates nothing."""
        # The user's env, less what an earlier execute of this same object shipped (a retry in-process).
        env = {k: v for k, v in dict(getattr(self, "env", None) or {}).items() if k not in self._shipped}
        check_env_names(env)
        shipped = function_env(
            self.get_python_source(),
            self.python_callable.__name__,
            self.op_args,
            self.op_kwargs,
            file=f"<{self.custom_operator_name} {self.task_id}>",
        )
        self._shipped = frozenset(shipped)
        self.env = {**env, **shipped}
        return super().execute(context)


class _FineTuneJobFunctionOperator(_FunctionWorkloadOperator, FineTuneJobOperator):
    custom_operator_name = "@task.finetune_job"
    workload = _decorated(FINETUNE_JOB)
    template_fields: Sequence[str] = _template_fields(FineTuneJobOperator)


class _PyTorchJobFunctionOperator(_FunctionWorkloadOperator, PyTorchJobOperator):
    custom_operator_name = "@task.pytorch_job"
    workload = _decorated(PYTORCHJOB)
    template_fields: Sequence[str] = _template_fields(PyTorchJobOperator)


def finetune_job_task(
    python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """``@task.finetune_job(...)``: run the function in a batch/v1 Job; takes every argument of
    :class:`~airflow_k8s_ml.operators.training.FineTuneJobOperator` but ``command``, ``args`` and
    ``manifest``; the XCom is the function's return value (rank 0's)."""
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_FineTuneJobFunctionOperator,
        **kwargs,
    )


def pytorch_job_task(
    python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """``@task.pytorch_job(...)``: run the function on every replica of a Kubeflow PyTorchJob (master +
    ``workers``); takes every argument of :class:`~airflow_k8s_ml.operators.training.PyTorchJobOperator` but
    ``command``, ``args`` and ``manifest``; the XCom is ``master-0``'s return value."""
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_PyTorchJobFunctionOperator,
        **kwargs,
    )
