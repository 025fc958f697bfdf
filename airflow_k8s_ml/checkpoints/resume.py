"""Where training starts: ``resolve_resume`` (Airflow side, per attempt) and ``resume_point`` (pod side, per
pod start).

``resolve_resume`` is called by the training operators on every attempt (first run, retry after a failure),
with the store's connection, so the pod receives a URI already checked to be complete (``RESUME_FROM``).
``resume_point`` is what the pod itself calls when it starts: a pod that replaces an evicted or preempted one
within the same attempt gets the same ``RESUME_FROM`` as the first, which may be several checkpoints old by
then; it continues from the newest complete checkpoint under ``CHECKPOINT_URI`` instead (never an older one
than ``RESUME_FROM``), so a disruption loses at most one checkpoint interval. Public for users' own
training code (``from airflow_k8s_ml.checkpoints import resume_point``).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_k8s_ml.checkpoints.manifest import parse_step_folder
from airflow_k8s_ml.checkpoints.store import CheckpointStore
from airflow_k8s_ml.checkpoints.uri import parse_uri
from airflow_k8s_ml.errors import CheckpointError, ValidationError

LATEST = "latest"


def resolve_resume(
    resume_from: str | None,
    base_uri: str | None,
    aws_conn_id: str | None = "aws_default",
    log: logging.Logger | Any | None = None,
    verify: str = "checksums",
) -> str | None:
    """Resolve ``resume_from`` to a checkpoint URI, or None for a fresh start.

    * ``None`` / ``""``  -> None (no resume requested);
    * ``"latest"``       -> the newest complete checkpoint under ``base_uri``; None (logged) if there is none;
    * a step URI         -> that URI, after verifying it is complete (else CheckpointError listing the
                            problems: an explicit request must not silently turn into a fresh start).
    """
    log = log or logging.getLogger(__name__)
    if not resume_from:
        return None
    if resume_from.strip().lower() == LATEST:
        if not base_uri:
            raise ValidationError("resume_from", "'latest' needs a checkpoint base URI to search under")
        latest = CheckpointStore(base_uri, aws_conn_id).latest_complete(verify=verify)
        if latest is None:
            log.info("no complete checkpoint under %s, starting fresh", base_uri)
            return None
        log.info("resuming from %s (step %s)", latest.uri, latest.step)
        return latest.uri
    location = parse_uri(resume_from, "resume_from")
    uri = location.uri + "/"
    problems = CheckpointStore(location.parent().uri, aws_conn_id).verify(uri, mode=verify)
    if problems:
        raise CheckpointError(f"resume_from={uri} is not a complete checkpoint: {'; '.join(problems)}")
    log.info("resuming from %s", uri)
    return uri


def resume_point(
    checkpoint_uri: str | None,
    resume_from: str | None = None,
    *,
    s3_client: Any | None = None,
    verify: str = "checksums",
    log: logging.Logger | Any | None = None,
) -> str | None:
    """The checkpoint a starting pod resumes from: the newest complete one under ``checkpoint_uri``, unless
    ``resume_from`` (the operator's ``RESUME_FROM``) is a later step; None for a fresh start.

    Pod side: ``s3://`` goes through ``s3_client`` or one built from the environment (``AWS_*``, as the
    checkpoint writer's), never an Airflow connection. Checks are by step number, the order the writer
    commits in. A ``resume_from`` that is not a step folder is returned as given (the loader then says why).
    """
    log = log or logging.getLogger(__name__)
    if not checkpoint_uri:
        return resume_from or None
    location = parse_uri(checkpoint_uri, "checkpoint_uri")
    client = s3_client
    if location.scheme == "s3" and client is None:
        from airflow_k8s_ml.checkpoints.s3_backend import env_s3_client

        client = env_s3_client()
    newest = CheckpointStore(location.uri, None, s3_client=client).latest_complete(verify=verify)
    floor = _step_of(resume_from)
    if newest is None or (resume_from and (floor is None or newest.step < floor)):
        if resume_from:
            log.info("resuming from %s (RESUME_FROM)", resume_from)
        return resume_from or None
    if resume_from and newest.uri.rstrip("/") != resume_from.rstrip("/"):
        log.info(
            "resuming from %s (step %s), newer than RESUME_FROM %s", newest.uri, newest.step, resume_from
        )
    else:
        log.info("resuming from %s (step %s)", newest.uri, newest.step)
    return newest.uri


def _step_of(uri: str | None) -> int | None:
    if not uri:
        return None
    try:
        return parse_step_folder(parse_uri(uri, "resume_from").name)
    except ValidationError:
        return None
