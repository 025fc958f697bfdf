"""One error tree for the whole package.

Operators, manifests, checkpoints and the local cluster raise these (never bare ``Exception``) so callers can
catch by meaning: a :class:`ValidationError` always means "bad input, nothing was created".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import re

#: What a Rich markup tag starts with after its ``[`` (``rich.markup.RE_TAGS``): such a bracket pair is
#: taken for a style and dropped by ``airflow dags list-import-errors`` (and every Rich console).
_TAG_START = "abcdefghijklmnopqrstuvwxyz#/@"


def _items(content: str) -> list[str]:
    """A regular-expression character class's items: ranges (``a-z``) and single characters."""
    items, i = [], 0
    while i < len(content):
        if i + 2 < len(content) and content[i + 1] == "-":
            items.append(content[i : i + 3])
            i += 3
        else:
            items.append(content[i])
            i += 1
    return items


def _proof_bracket(match: re.Match[str]) -> str:
    before, content, whole = match.group(1), match.group(2), match.group(0)
    if not content or content[0] not in _TAG_START:
        return whole
    if before and (before.isalnum() or before in "_."):  # a key path, requests[memory]: quote the key
        return f'{before}["{content}"]'
    items = _items(content)  # a character class: the same class, its first item one Rich leaves alone
    if "-" in items:
        items.remove("-")
        return f"{before}[-{''.join(items)}]"
    safe = next((i for i, item in enumerate(items) if item[0] not in _TAG_START), None)
    if safe is None:
        return whole
    return f"{before}[{''.join(items[safe:] + items[:safe])}]"


def markup_proof(text: str) -> str:
    """``text`` with the same meaning but no ``[`` Rich would read as a markup tag.

    Why: ``airflow dags list-import-errors`` prints a DAG's import error through Rich, which drops every
    ``[word...]`` as a style: ``requests[memory]`` showed as ``requests`` and the quantity pattern lost
    ``[eEinumkKMGTP]``. Escaping with ``\\[`` would put backslashes in the UI's import-error banner, which
    shows the text as is; so a key path's key is quoted (``requests["memory"]``, as the Python that set it
    reads) and a character class starts with an item Rich ignores (``[EeinumkKMGTP]``, ``[0-9a-z]``, the
    same class). A class of lowercase items only (``[a-z]``) cannot be reordered and is left as is. Runs
    only when an error is raised (the ``re`` import and compile are not paid on a DAG parse)."""
    if "[" not in text:
        return text
    import re

    return re.sub(r"(.?)\[([^\[\]]*)\]", _proof_bracket, text)


class K8sMLError(Exception):
    """Base of every error this package raises on purpose."""


class ValidationError(K8sMLError, ValueError):
    """Invalid user input. Raised before any API call, so nothing exists on the cluster.

    ``field`` names the offending argument or manifest path (``spec.template.spec.containers[0].image``).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(markup_proof(f"{field}: {message}"))
        self.field = field
        self.message = message


class WorkloadFailed(K8sMLError):
    """A workload reached a terminal failed state (or was failed by an Airflow-side deadline)."""


class DeadlineExceeded(WorkloadFailed):
    """An Airflow-side deadline expired; ``deadline`` names it as the user wrote it: ``admission_timeout``,
    ``startup_timeout``, ``run_timeout``, ``deadline`` (or ``rollout_timeout`` for a model deployment)."""

    def __init__(self, deadline: str, message: str) -> None:
        super().__init__(message)
        self.deadline = deadline


class TaskKilled(K8sMLError):
    """The task was killed while its workload ran, and its ``on_kill`` deleted the workload: the reason is
    the kill, whatever state the deletion left the workload in (``operators.outcome.killed_message``)."""


class CheckpointError(K8sMLError):
    """A checkpoint is missing, incomplete or corrupt, or a commit lost a race."""


class MetricGateFailed(CheckpointError):
    """A checkpoint's metrics did not satisfy the rules."""


class ApiError(K8sMLError):
    """The Kubernetes API server answered ``status`` (a ``Status`` with ``reason`` and ``message``).

    ``status == 0`` means no HTTP answer (connection refused, reset, timed out). Built from an answer in
    one place (:func:`airflow_k8s_ml.kube.errors.api_error`); the sync and async clients and the watch all
    raise this one class, so callers catch one thing whatever the transport.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        retry_after: float | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.details = dict(details or {})

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        """410 Expired: a resourceVersion older than the server's history; re-list."""
        return self.status == 410
