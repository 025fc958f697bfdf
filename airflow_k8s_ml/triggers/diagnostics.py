"""What went wrong, in a few hundred bytes (pure): failed pods first-failure-first, and the event message.

Both waits (the triggerer's and the worker's) gather what a :class:`~airflow_k8s_ml.status.wait_report.Report`
asks (:func:`pods_to_read`, :func:`log_source` for each) and send :func:`final_event`.

Why in the trigger: the event is what the operator fails with, so it should already say which replica
died first, with its exit code and last lines (distributed runs: the others usually fail *because* of it),
without the worker asking the cluster again. Kept small on purpose (it is stored in the metadata DB):
at most :data:`MAX_PODS` pods and ~20 lines each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.kube.resources import replica_name
from airflow_k8s_ml.status import WorkloadState, pod_problem
from airflow_k8s_ml.status.disruption import disruption_of
from airflow_k8s_ml.triggers.events import WorkloadEvent

if TYPE_CHECKING:
    from airflow_k8s_ml.status.wait import Target
    from airflow_k8s_ml.status.wait_report import Diagnose, Report

__all__ = [
    "MAX_PODS",
    "event_report",
    "failed_pods",
    "failure_message",
    "final_event",
    "log_source",
    "pod_report",
    "pods_to_read",
]

MAX_PODS = 5
MAX_LINE = 300


def _terminations(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Non-zero exits of the pod's containers (current instance, else the previous one)."""
    out: list[Mapping[str, Any]] = []
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        for holder in ("state", "lastState"):
            terminated = (container.get(holder) or {}).get("terminated")
            if isinstance(terminated, Mapping) and terminated.get("exitCode") not in (0, None):
                out.append({**terminated, "container": container.get("name")})
                break
    return out


def _first_exit(pod: Mapping[str, Any]) -> str:
    times = [str(t.get("finishedAt") or "") for t in _terminations(pod)]
    times = [t for t in times if t]
    return min(times) if times else ""


#: Exit codes of a container ended by a signal it was sent (SIGTERM, SIGKILL): how a controller stops the
#: other replicas once one failed, so within the same second they come after a replica's own error.
_KILLED = frozenset({137, 143})


def _killed(pod: Mapping[str, Any]) -> bool:
    return any(t.get("exitCode") in _KILLED for t in _terminations(pod))


def failed_pods(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods that failed or are stuck: a pod the cluster took away (``DisruptionTarget``) first - a kind that
    cannot ignore a disruption fails *because* of it, and its controller then stops the others - then
    earliest exit first (pods that never exited after, by name).

    ``finishedAt`` has whole seconds: when a node fails and its JobSet (or Job) terminates the others at
    once, they all finish in the same second, and the one that exited on its own, not by a signal, is the
    first failure."""
    chosen = [
        pod
        for pod in pods
        if (pod.get("status") or {}).get("phase") == "Failed"
        or _terminations(pod)
        or pod_problem(pod)
        or disruption_of(pod)
    ]
    return sorted(
        chosen,
        key=lambda p: (
            disruption_of(p) is None,
            _first_exit(p) == "",
            _first_exit(p),
            _killed(p),
            replica_name(p),
        ),
    )


def _problem(pod: Mapping[str, Any]) -> str:
    """What happened to the pod: ``disrupted by the cluster (EvictionByEvictionAPI: ...)`` first when the
    cluster took it, then its container's problem."""
    problem = pod_problem(pod) or str((pod.get("status") or {}).get("reason") or "")
    disruption = disruption_of(pod)
    if disruption is None:
        return problem
    taken = f"disrupted by the cluster ({disruption.get('reason')}: {disruption.get('message')})"
    return f"{taken}; {problem}" if problem else taken


def pod_report(pod: Mapping[str, Any], last_lines: Sequence[str]) -> dict[str, Any]:
    """One failed pod for the event: replica, pod, problem, exit code, when, the last lines."""
    exits = _terminations(pod)
    first = min(exits, key=lambda t: str(t.get("finishedAt") or "~")) if exits else None
    return {
        "replica": replica_name(pod),
        "pod": str((pod.get("metadata") or {}).get("name") or "?"),
        "problem": _problem(pod),
        "exit_code": first.get("exitCode") if first else None,
        "finished_at": str(first.get("finishedAt") or "") if first else "",
        "last_lines": [line[:MAX_LINE] for line in list(last_lines)[-20:]],
    }


def failure_message(
    kind: str, namespace: str, name: str, state: WorkloadState, reports: Sequence[Mapping[str, Any]]
) -> str:
    """``PyTorchJob ml/ft failed (BackoffLimitExceeded): ...; first failure: [worker-1] container pytorch
    terminated with exit code 1 (Error): <last line>``, plus one line per other failed pod."""
    text = f"{kind} {namespace}/{name} {state.summary()}"
    if not reports:
        return text
    first, *others = reports
    lead = "first failure" if others else "failed pod"
    text += f"; {lead}: [{first['replica']}] {first['problem'] or 'failed'}"
    last = next((line for line in reversed(first.get("last_lines") or []) if line.strip()), "")
    if last and last.strip() not in (first["problem"] or ""):  # a termination message may quote it already
        text += f": {last.strip()}"
    for report in others:
        text += f"\n  [{report['replica']}] {report['problem'] or 'failed'}"
    return text


def pods_to_read(diagnose: Diagnose) -> list[Mapping[str, Any]]:
    """The pods whose last lines the event carries: failed ones first-failure-first, then (on a deadline)
    the others; at most :data:`MAX_PODS`."""
    chosen = failed_pods(diagnose.pods)
    if diagnose.every_pod:
        chosen += [pod for pod in diagnose.pods if all(pod is not c for c in chosen)]
    return chosen[:MAX_PODS]


def log_source(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(pod name, container) to read a pod's last lines from: its first container; None when no container
    ever started (there is no log to read)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    if not containers or not (pod.get("status") or {}).get("containerStatuses"):
        return None
    return str((pod.get("metadata") or {}).get("name")), str(containers[0].get("name"))


def final_event(
    report: Report,
    target: Target,
    reports: Sequence[dict[str, Any]] = (),
    warnings: Sequence[str] = (),
    log_cursor: dict[str, Any] | None = None,
) -> WorkloadEvent:
    """The event a final report sends, with the diagnostics it asked for (a failure names its first failed
    pod in the message), when Kueue admitted the job, and the pods the cluster took away while it waited."""
    decision = report.decision
    message = None
    if decision.verdict == "failed" and report.diagnose is not None:
        message = failure_message(target.kind, target.namespace, target.name, decision.state, reports)
    event = WorkloadEvent.decided(
        decision, target, message=message, pods=list(reports), warnings=list(warnings), log_cursor=log_cursor
    )
    disruptions = [d.to_payload() for d in report.said.disrupted]
    return replace(event, admitted_at=report.admitted_at, disruptions=disruptions)


def event_report(
    what: str, state: WorkloadState, pods: Iterable[Mapping[str, Any]], warnings: Iterable[str]
) -> str:
    """Multi-line text for the task log: final state, each failed pod (first failure first) with its exit
    code, problem and last log lines, then the Warning events - written before anything is deleted.

    A pod whose report is marked ``relayed`` had its log relayed into the task log by the trigger: its last
    lines are not printed a second time (every training line appears once in the task log)."""
    lines = [f"{what}: {state.summary()}"]
    for pod in pods:
        exit_code = pod.get("exit_code")
        replica, name = pod.get("replica"), pod.get("pod")
        head = f"pod {name}" if replica in (None, name) else f"[{replica}] pod {name}"
        if exit_code is not None:
            head += f" exited {exit_code}"
        if pod.get("problem"):
            head += f": {pod['problem']}"
        lines.append(head)
        if pod.get("relayed") and pod.get("last_lines"):
            lines.append("  (its last lines are in the log above)")
        else:
            lines += [f"  | {line}" for line in pod.get("last_lines") or []]
    warnings = list(warnings)
    if warnings:
        lines.append("Warning events:")
        lines += [f"  {warning}" for warning in warnings]
    return "\n".join(lines)
