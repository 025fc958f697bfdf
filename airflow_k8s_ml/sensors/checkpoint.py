"""``CheckpointSensor``: wait, with a deadline, until a complete checkpoint newer than a step or time appears.

Deferrable by default: after one immediate check the wait moves to :class:`CheckpointTrigger`, freeing the
worker slot. Import-light: the store, the manifest parser and the trigger (dataclass modules, costly in every
dag-processor fork) are imported where they are used; ``__init__`` only checks the literal arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException

from airflow_k8s_ml.checkpoints.integrity import check_mode
from airflow_k8s_ml.errors import CheckpointError, ValidationError


def _templated(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


class CheckpointSensor(BaseSensorOperator):
    """Succeed when a complete checkpoint under ``base_uri`` is newer than ``newer_than_step`` and/or
    ``newer_than_time``; fail with ``AirflowSensorTimeout`` naming what was awaited once ``deadline`` passes.

    Returns (XCom) ``{"uri", "step", "metrics", "created_at"}`` of the checkpoint found.

    :param base_uri: ``s3://bucket/prefix`` or ``file:///abs/dir`` (templated).
    :param newer_than_step: only a step strictly greater counts (templated).
    :param newer_than_time: only a checkpoint created strictly later counts; datetime or ISO 8601 (templated).
    :param deadline: how long to wait from the first attempt; None waits for the sensor ``timeout``.
    :param verify: how a candidate is checked: ``none``, ``checksums`` (default, zero download) or ``full``.
    :param deferrable: wait in the triggerer (default) rather than in a worker slot.
    """

    template_fields: Sequence[str] = ("base_uri", "newer_than_step", "newer_than_time")

    def __init__(
        self,
        *,
        base_uri: str,
        newer_than_step: int | str | None = None,
        newer_than_time: datetime | str | None = None,
        deadline: timedelta | None = None,
        verify: str = "checksums",
        aws_conn_id: str | None = "aws_default",
        poke_interval: timedelta | float = 60,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        if not _templated(base_uri):
            from airflow_k8s_ml.checkpoints.uri import parse_uri

            parse_uri(base_uri, "base_uri")
        if deadline is not None and not isinstance(deadline, timedelta):
            raise ValidationError("deadline", f"must be a timedelta or None, got {type(deadline).__name__}")
        if deadline is not None and deadline <= timedelta(0):
            raise ValidationError("deadline", f"must be a positive duration, got {deadline}")
        self.base_uri = base_uri
        self.newer_than_step = newer_than_step
        self.newer_than_time = newer_than_time
        self.deadline = deadline
        self.verify = check_mode(verify)
        self.aws_conn_id = aws_conn_id
        self.deferrable = deferrable
        self._deadline_at: str | None = None

    # -- resolved (post-templating) arguments ---------------------------------------------------------------
    def _step(self) -> int | None:
        if self.newer_than_step in (None, ""):
            return None
        try:
            return int(self.newer_than_step)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                "newer_than_step", f"must be an integer, got {self.newer_than_step!r}"
            ) from exc

    def _time(self) -> str | None:
        from airflow_k8s_ml.checkpoints.manifest import parse_time

        if self.newer_than_time in (None, ""):
            return None
        try:
            return parse_time(self.newer_than_time).isoformat()  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                "newer_than_time", f"not an ISO 8601 time: {self.newer_than_time!r}"
            ) from exc

    def _start_deadline(self, context: Any) -> None:
        from airflow_k8s_ml.checkpoints.manifest import parse_time

        if self.deadline is None:
            return
        started = datetime.now(UTC)
        if self.reschedule:  # the wait spans several tries; count from the first
            ti = context.get("ti") if hasattr(context, "get") else None
            first = ti.get_first_reschedule_date(context) if ti is not None else None
            started = parse_time(first) if first else started
        self._deadline_at = (started + self.deadline).isoformat()

    def _deadline_passed(self) -> bool:
        from airflow_k8s_ml.checkpoints.manifest import parse_time

        return self._deadline_at is not None and datetime.now(UTC) >= parse_time(self._deadline_at)

    def _wanted(self) -> str:
        from airflow_k8s_ml.triggers.checkpoint import describe_wait

        return describe_wait(self.base_uri, self._step(), self._time())

    # -- Airflow entry points -------------------------------------------------------------------------------
    def execute(self, context: Any) -> Any:
        from airflow_k8s_ml.triggers.checkpoint import CheckpointTrigger

        self._start_deadline(context)
        if not self.deferrable:
            return super().execute(context)
        found = self.poke(context)
        if found:
            return found.xcom_value if isinstance(found, PokeReturnValue) else None
        self.log.info("waiting in the triggerer for %s (deadline %s)", self._wanted(), self._deadline_at)
        self.defer(
            trigger=CheckpointTrigger(
                base_uri=self.base_uri,
                newer_than_step=self._step(),
                newer_than_time=self._time(),
                deadline_at=self._deadline_at,
                poke_interval=self.poke_interval,
                verify=self.verify,
                aws_conn_id=self.aws_conn_id,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),  # the sensor's own timeout stays a backstop
        )

    def poke(self, context: Any) -> bool | PokeReturnValue:
        from airflow_k8s_ml.checkpoints.store import CheckpointStore
        from airflow_k8s_ml.triggers.checkpoint import find_newer

        store = CheckpointStore(self.base_uri, self.aws_conn_id)
        match, newest = find_newer(store, self._step(), self._time(), self.verify)
        if match is not None:
            self.log.info("found %s (step %s)", match.uri, match.step)
            return PokeReturnValue(is_done=True, xcom_value=match.to_xcom())
        if self._deadline_passed():
            seen = f"newest complete: step {newest.step} ({newest.uri})" if newest else "none complete yet"
            self._timeout(f"deadline {self._deadline_at} passed without {self._wanted()}; {seen}")
        return False

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        from airflow_k8s_ml.triggers.checkpoint import CheckpointEvent

        result = CheckpointEvent.from_payload(event)
        if result.status == "found":
            self.log.info("%s", result.message)
            return result.checkpoint
        if result.status == "deadline":
            self._timeout(result.message)
        raise CheckpointError(result.message)

    def _timeout(self, message: str) -> None:
        if self.soft_fail:
            raise AirflowSkipException(message)
        raise AirflowSensorTimeout(message)
