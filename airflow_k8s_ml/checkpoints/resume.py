"""``resolve_resume``: turn ``resume_from`` into the checkpoint URI a training attempt should start from.

Called by the training operators on every attempt (first run, retry after eviction, retry after failure), on
the Airflow side with the store's connection, so the pod receives a URI already checked to be complete.
"""

from __future__ import annotations

import logging
from typing import Any

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
