"""Why is a pod stuck, in the cluster's own words, and can waiting heal it? (pure)

Why a module of its own: a wait used to say nothing about a pod that could never start until a budget ran
out (or forever, without one). The waits now name a stuck pod as soon as they see it (the stuck line of
:mod:`airflow_k8s_ml.status.wait_report`) and fail early on a cause that waiting cannot heal
(:func:`airflow_k8s_ml.status.wait.decide`); both read the causes here, from what the kubelet and the
scheduler write: the pod's ``PodScheduled`` condition, its containers' waiting states, and - for a volume
that cannot be mounted, which leaves the pod's status at ``ContainerCreating`` - its ``FailedMount``
Warning events.

| cause | seen as | heals by waiting? |
|---|---|---|
| ``Unschedulable`` | ``PodScheduled=False``: the scheduler's message | yes: capacity frees up |
| ``ErrImagePull``/``ImagePullBackOff`` | the container's waiting state, with the image | yes: an outage |
| ``InvalidImageName`` | the container's waiting state | no: the name never parses |
| ``CreateContainerConfigError`` | runAsNonRoot refused for the image | no: the image's user is fixed |
| ``CreateContainerConfigError`` | a Secret/ConfigMap (or key) not found | no, after a grace period |
| ``FailedMount`` | a Secret/ConfigMap volume source not found (Warning events) | no, after a grace period |
| ``FailedMount`` | any other mount failure (Warning events) | yes: e.g. a volume still attaching |
| ``CrashLoopBackOff`` | the container's waiting state: restarts, last exit | no budget: it runs, then fails |

A missing Secret or ConfigMap is given a grace period because it is routinely created a moment after the
workload (by another task, an operator such as external-secrets): it counts as permanent only when it is
still missing that long after the pod was scheduled.

Standard library only, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_k8s_ml.status._conditions import find, status_of

__all__ = [
    "DEFAULT_CONFIG_GRACE",
    "DEFAULT_RULES",
    "PERMANENT",
    "PERMANENT_AFTER_GRACE",
    "Stuck",
    "StuckRules",
    "needs_events",
    "permanent_cause",
    "pod_name",
    "stuck_causes",
]

#: Causes that waiting never heals: the task may fail at once.
PERMANENT = "permanent"
#: Causes that heal only if someone acts (a missing Secret/ConfigMap): permanent after the grace period.
PERMANENT_AFTER_GRACE = "after-grace"

#: Container waiting reasons reported as stuck, and the cause key they share (ErrImagePull and
#: ImagePullBackOff alternate on every pull attempt: one cause, said once).
_WAITING_CAUSES: Mapping[str, str] = {
    "ErrImagePull": "image-pull",
    "ImagePullBackOff": "image-pull",
    "ErrImageNeverPull": "image-pull",
    "InvalidImageName": "invalid-image",
    "CreateContainerConfigError": "config",
    "CreateContainerError": "create",
    "RunContainerError": "run",
    "CrashLoopBackOff": "crash-loop",
}
#: What the kubelet writes for a runAsNonRoot refusal (pkg/kubelet/kuberuntime/security_context_others.go).
_NON_ROOT_REFUSALS = ("image will run as root", "runAsUser breaks non-root policy")
#: The kubelet's missing Secret/ConfigMap messages (``secret "x" not found``, ``couldn't find key k in
#: Secret ns/x``).
_MISSING_CONFIG = ("not found", "couldn't find key")


#: Seconds a missing Secret or ConfigMap may take to appear after the pod was scheduled before the cause
#: counts as permanent (the ``[airflow_k8s_ml] missing_config_grace_seconds`` option's default).
DEFAULT_CONFIG_GRACE = 120.0


@dataclass(frozen=True)
class StuckRules:
    """Whether a wait fails early on a cause waiting cannot heal (``fail_fast``), and the grace period of
    a missing Secret/ConfigMap (seconds from the start of the start-up phase)."""

    fail_fast: bool = True
    config_grace: float = DEFAULT_CONFIG_GRACE


#: The rules with the declared defaults.
DEFAULT_RULES = StuckRules()


@dataclass(frozen=True)
class Stuck:
    """One reason a pod cannot progress. ``key`` identifies the cause for "said once" (pod, container,
    cause); ``text`` is the line in the cluster's words; ``heals`` is None when waiting may heal it, else
    :data:`PERMANENT` or :data:`PERMANENT_AFTER_GRACE`; ``crash_loop`` asks for the container's last lines."""

    pod: str
    key: str
    text: str
    heals: str | None = None
    container: str = ""
    crash_loop: bool = False


def pod_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "?")


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _last_exit(container: Mapping[str, Any]) -> str:
    last = (container.get("lastState") or {}).get("terminated")
    if not isinstance(last, Mapping):
        return ""
    text = f"last exit code {last.get('exitCode')}"
    if last.get("reason"):
        text += f" ({last['reason']})"
    return text


def _permanence(reason: str, message: str) -> str | None:
    if reason == "InvalidImageName":
        return PERMANENT
    if reason == "CreateContainerConfigError":
        if any(words in message for words in _NON_ROOT_REFUSALS):
            return PERMANENT
        if any(words in message for words in _MISSING_CONFIG):
            return PERMANENT_AFTER_GRACE
    return None


def _container_cause(pod: str, container: Mapping[str, Any]) -> Stuck | None:
    waiting = (container.get("state") or {}).get("waiting")
    if not isinstance(waiting, Mapping):
        return None
    reason = str(waiting.get("reason") or "")
    cause = _WAITING_CAUSES.get(reason)
    if cause is None:
        return None
    name = str(container.get("name") or "?")
    message = str(waiting.get("message") or "")
    text = f"container {name}: {reason}" + (f": {message}" if message else "")
    if reason == "CrashLoopBackOff":
        details = [f"restarts: {container.get('restartCount', 0)}", _last_exit(container)]
        text += " (" + "; ".join(d for d in details if d) + ")"
    return Stuck(
        pod,
        f"{name}/{cause}",
        text,
        _permanence(reason, message),
        container=name,
        crash_loop=reason == "CrashLoopBackOff",
    )


def _unschedulable(pod: Mapping[str, Any]) -> Stuck | None:
    scheduled = find(pod, "PodScheduled")
    if scheduled is None or scheduled.get("status") != "False" or not scheduled.get("reason"):
        return None
    text = str(scheduled["reason"]) + (f": {scheduled['message']}" if scheduled.get("message") else "")
    return Stuck(pod_name(pod), "unschedulable", text)


def _mount_failures(pod: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> Stuck | None:
    """The newest ``FailedMount`` Warning of a pod still creating its containers."""
    if status_of(pod).get("phase") not in (None, "Pending"):
        return None
    uid = _uid(pod)
    mine = [
        e
        for e in events
        if e.get("reason") == "FailedMount" and str((e.get("involvedObject") or {}).get("uid")) == uid
    ]
    if not mine or not uid:
        return None
    message = str(mine[-1].get("message") or "").strip()
    return Stuck(pod_name(pod), "mount", f"FailedMount: {message}", _mount_permanence(message))


def _mount_permanence(message: str) -> str | None:
    """A Secret or ConfigMap volume whose source does not exist (the kubelet's ``MountVolume.SetUp failed
    for volume "v" : secret "x" not found``) heals only if someone creates it: the grace period applies, as
    for the same object missing from the environment. Any other mount failure may heal by waiting."""
    missing = message.endswith(" not found") and any(
        f'{kind} "' in message for kind in ("secret", "configmap", "configMap")
    )
    return PERMANENT_AFTER_GRACE if missing else None


def stuck_causes(pod: Mapping[str, Any], events: Sequence[Mapping[str, Any]] = ()) -> list[Stuck]:
    """Every reason ``pod`` is stuck, in the cluster's words (``events``: Warning events, oldest first, read
    for pods the status alone cannot explain; see :func:`needs_events`). A finished pod is not stuck."""
    if status_of(pod).get("phase") in ("Succeeded", "Failed"):
        return []
    name = pod_name(pod)
    causes = [c for c in (_unschedulable(pod), _mount_failures(pod, events)) if c is not None]
    status = status_of(pod)
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or ():
            if isinstance(container, Mapping):
                cause = _container_cause(name, container)
                if cause is not None:
                    causes.append(cause)
    return causes


def needs_events(pod: Mapping[str, Any]) -> bool:
    """The pod is scheduled but still Pending with no stuck cause in its status (``ContainerCreating``):
    only its events can tell a volume that cannot be mounted."""
    status = status_of(pod)
    if status.get("phase") not in (None, "Pending") or not (pod.get("spec") or {}).get("nodeName"):
        return False
    return not stuck_causes(pod)


def permanent_cause(
    pods: Iterable[Mapping[str, Any]], *, now: float, startup_since: float | None, rules: StuckRules
) -> tuple[Stuck | None, float | None]:
    """The first cause of ``pods`` that waiting cannot heal (by ``now``; a grace-period cause counts from
    ``startup_since``, the start of the start-up phase), and when a cause still in its grace period becomes
    permanent (None: none pending). Nothing when ``rules.fail_fast`` is off."""
    if not rules.fail_fast:
        return None, None
    pending: float | None = None
    for pod in pods:
        for cause in stuck_causes(pod):
            if cause.heals == PERMANENT:
                return cause, None
            if cause.heals == PERMANENT_AFTER_GRACE and startup_since is not None:
                at = startup_since + rules.config_grace
                if at <= now:
                    return cause, None
                pending = at if pending is None else min(pending, at)
    return None, pending
