"""A Python function as a workload's program: how the task decorators ship it and read its value back.

Why so: ``@task.finetune_job`` and ``@task.pytorch_job`` run the decorated function inside the workload's
pod(s), as the cncf provider's ``@task.kubernetes`` does for a bare pod: the function's source and its
(rendered) arguments travel in two environment variables, and a short stdlib-only program (:data:`BOOTSTRAP`,
the container's ``command``) defines the function, calls it and writes the outcome.

Where the value comes back: the container's **termination message** (``/dev/termination-log``, the path
Kubernetes gives every container by default, read back from ``status.containerStatuses[].state.terminated
.message``). Not the log: the log relay and any ``print`` share it, and a line can be cut or interleaved;
not a sidecar: the cncf provider's XCom sidecar needs ``pods/exec``. The kubelet keeps at most 4096 bytes
per container (upstream ``MaxContainerTerminationMessageLength``), so a value whose JSON is larger fails
the pod saying so: store large results (the checkpoint store) and return their URI. A function that raises
writes the exception's last traceback line there instead, which the failure message quotes with the pod.

Of a distributed run every replica calls the function; the value returned is rank 0's (``master-0`` of a
PyTorchJob; the pod of a Job). Import-light: imported on every DAG parse that uses a decorator (pure text
and functions; the cluster read is the last function, called with a client in ``execute``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_k8s_ml.errors import K8sMLError, ValidationError

__all__ = [
    "BOOTSTRAP",
    "COMMAND",
    "FUNCTION_ENV",
    "RESULT_KEY",
    "collect_return_value",
    "function_env",
    "return_value",
    "returned_value",
]

#: The variables the decorators set in the pod (a user ``env`` may not set them).
SOURCE_ENV = "AIRFLOW_K8S_ML_FUNCTION_SOURCE"
CALL_ENV = "AIRFLOW_K8S_ML_FUNCTION_CALL"
RESULT_PATH_ENV = "AIRFLOW_K8S_ML_RESULT_PATH"
FUNCTION_ENV = (SOURCE_ENV, CALL_ENV, RESULT_PATH_ENV)

#: Kubernetes' default ``terminationMessagePath`` (and the limit the kubelet keeps of it, in bytes).
TERMINATION_PATH = "/dev/termination-log"
MESSAGE_LIMIT = 4096

#: The key of the termination message that holds a return value (anything else there is not ours).
RESULT_KEY = "airflow_k8s_ml_return_value"

#: The pod's program: define the function from its source, call it with the arguments, write the outcome to
#: the termination message. Stdlib only, so any image with Python 3.8+ runs it.
BOOTSTRAP = f"""
import base64, inspect, json, os, sys, traceback, __future__

def _write(text):
    path = os.environ.get({RESULT_PATH_ENV!r})
    if not path:
        return
    try:
        with open(path, "w") as out:
            out.write(text)
    except OSError as exc:
        print("cannot write the termination message " + path + ": " + str(exc), file=sys.stderr)

def _load(name):
    return base64.urlsafe_b64decode(os.environ[name].encode()).decode()

try:
    call = json.loads(_load({CALL_ENV!r}))
    scope = {{"__name__": "__airflow_k8s_ml_task__"}}
    flags = __future__.annotations.compiler_flag
    exec(compile(_load({SOURCE_ENV!r}), call["file"], "exec", flags=flags, dont_inherit=True), scope)
    function = scope[call["function"]]
    args, kwargs = list(call["args"]), dict(call["kwargs"])
    names = list(inspect.signature(function).parameters)
    for name, variable in (("resume_from", "RESUME_FROM"), ("checkpoint_uri", "CHECKPOINT_URI")):
        if name in names and name not in kwargs and names.index(name) >= len(args):
            kwargs[name] = os.environ.get(variable) or None
    value = function(*args, **kwargs)
    text = json.dumps({{{RESULT_KEY!r}: value}})
except Exception as exc:
    traceback.print_exc()
    _write(traceback.format_exception_only(type(exc), exc)[-1].strip()[:{MESSAGE_LIMIT}])
    sys.exit(1)
size = len(text.encode())
if size > {MESSAGE_LIMIT}:
    message = (
        "the return value is " + str(size) + " bytes of JSON; a termination message holds {MESSAGE_LIMIT}: "
        "store large results (e.g. the checkpoint store) and return their URI"
    )
    print(message, file=sys.stderr)
    _write(message)
    sys.exit(1)
_write(text)
"""

#: The container's command (``args`` stay free: the decorators refuse them, the call carries the arguments).
COMMAND = ("python", "-c", BOOTSTRAP)


def _encode(text: str) -> str:
    """URL-safe base64: no ``/`` in the value, so no mount-path rewrite or shell ever touches it."""
    return base64.urlsafe_b64encode(text.encode()).decode()


def function_env(
    source: str, function: str, args: Iterable[Any], kwargs: Mapping[str, Any], file: str = "<task>"
) -> dict[str, str]:
    """The variables that carry one call of ``function`` (defined by ``source``) into the pod.

    The arguments travel as JSON, what an XCom holds: a value JSON cannot carry is an error naming the
    argument, raised in ``execute`` before anything is created."""
    given = [("op_args", f"argument {i}", a) for i, a in enumerate(args)]
    given += [("op_kwargs", f"argument {name!r}", v) for name, v in kwargs.items()]
    for field, where, value in given:
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                field, f"{where} of {function}() must be JSON-serializable to reach the pod: {exc}"
            ) from None
    call = {"function": function, "file": file, "args": list(args), "kwargs": dict(kwargs)}
    return {
        SOURCE_ENV: _encode(source),
        CALL_ENV: _encode(json.dumps(call)),
        RESULT_PATH_ENV: TERMINATION_PATH,
    }


def check_env_names(env: Any) -> None:
    """A user ``env`` may not set the variables that carry the function (parse time and execute)."""
    if isinstance(env, Mapping):
        taken = sorted(name for name in env if name in FUNCTION_ENV)
        if taken:
            raise ValidationError("env", f"{', '.join(taken)} is set by the task decorator; use another name")


def _messages(pod: Mapping[str, Any]) -> Iterable[str]:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated.get("exitCode") == 0 and isinstance(terminated.get("message"), str):
            yield terminated["message"]


def returned_value(pods: Iterable[Mapping[str, Any]], replica: Any) -> tuple[bool, Any]:
    """(found, value): the function's return value from the first pod, by replica name (``master-0``
    before ``worker-0``; ``node-0`` first), whose container exited 0 with our termination message."""
    for pod in sorted(pods, key=replica):
        for message in _messages(pod):
            try:
                decoded = json.loads(message)
            except ValueError:
                continue
            if isinstance(decoded, dict) and RESULT_KEY in decoded:
                return True, decoded[RESULT_KEY]
    return False, None


def collect_return_value(client: Any, record: Any) -> dict[str, Any]:
    """``{"return_value": ...}`` read from the succeeded workload's pods (a ``WorkloadKind.collect``).

    Pods already gone (``ttl_seconds_after_finished`` shorter than the wait's last read, a garbage
    collection) take the value with them: an error saying so rather than a silent None."""
    from airflow_k8s_ml.kube.resources import replica_name
    from airflow_k8s_ml.status.pod import owned_by

    pods = [p for p in client.pods_of(record.kind, record.name, record.namespace) if owned_by(p, record.uid)]
    found, value = returned_value(pods, replica_name)
    if not found:
        raise K8sMLError(
            f"{record.kind} {record.namespace}/{record.name} succeeded but no pod holds the function's "
            f"return value ({len(pods)} pod(s) left; their termination message is where it is kept): are "
            "the pods deleted before the task reads them (ttl_seconds_after_finished), or is "
            "terminationMessagePath changed in pod_options?"
        )
    return {"return_value": value}


def return_value(args: Any, result: Mapping[str, Any]) -> Any:
    """The XCom of a decorated task: the function's return value (a ``WorkloadKind.result``)."""
    return result.get("return_value")
