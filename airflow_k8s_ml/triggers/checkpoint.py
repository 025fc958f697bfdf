"""``CheckpointTrigger``: wait in the triggerer until a complete checkpoint newer than a step/time appears.

Storage has no watch API, so this polls; each poll runs the synchronous :class:`CheckpointStore` in a worker
thread (``asyncio.to_thread``) so the triggerer's event loop never blocks on HTTP. One store (one boto3
client) is reused for all polls of a trigger. The deadline travels as an absolute time, so a triggerer restart
resumes the same budget instead of starting a new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_k8s_ml.checkpoints.manifest import parse_time
from airflow_k8s_ml.checkpoints.store import Checkpoint, CheckpointStore

MAX_CONSECUTIVE_ERRORS = 3
"""Transient storage errors are retried on the next poll; this many in a row fail the wait with the error."""


@dataclass(frozen=True)
class CheckpointEvent:
    """The one event shape this trigger emits; the sensor reads it back with :meth:`from_payload`."""

    status: Literal["found", "deadline", "error"]
    message: str
    checkpoint: dict[str, Any] | None = None

    def to_payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> CheckpointEvent:
        return cls(status=payload["status"], message=payload["message"], checkpoint=payload.get("checkpoint"))


def describe_wait(base_uri: str, newer_than_step: int | None, newer_than_time: str | None) -> str:
    """Human wording of what is awaited, shared by the sensor's logs and the deadline message."""
    bounds = [f"step > {newer_than_step}"] if newer_than_step is not None else []
    bounds += [f"created after {newer_than_time}"] if newer_than_time else []
    return f"a complete checkpoint under {base_uri}" + (f" with {' and '.join(bounds)}" if bounds else "")


def find_newer(
    store: CheckpointStore, newer_than_step: int | None, newer_than_time: str | None, verify: str
) -> tuple[Checkpoint | None, Checkpoint | None]:
    """(match, newest complete): the newest complete checkpoint, and whether it is past both bounds."""
    latest = store.latest_complete(verify=verify)
    if latest is not None and latest.is_newer_than(newer_than_step, newer_than_time):
        return latest, latest
    return None, latest


class CheckpointTrigger(BaseTrigger):
    """Poll ``base_uri`` every ``poke_interval`` seconds until a matching checkpoint or ``deadline_at``."""

    def __init__(
        self,
        base_uri: str,
        newer_than_step: int | None = None,
        newer_than_time: str | None = None,
        deadline_at: str | None = None,
        poke_interval: float = 60.0,
        verify: str = "checksums",
        aws_conn_id: str | None = "aws_default",
    ) -> None:
        super().__init__()
        self.base_uri = base_uri
        self.newer_than_step = newer_than_step
        self.newer_than_time = newer_than_time
        self.deadline_at = deadline_at
        self.poke_interval = float(poke_interval)
        self.verify = verify
        self.aws_conn_id = aws_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "base_uri": self.base_uri,
                "newer_than_step": self.newer_than_step,
                "newer_than_time": self.newer_than_time,
                "deadline_at": self.deadline_at,
                "poke_interval": self.poke_interval,
                "verify": self.verify,
                "aws_conn_id": self.aws_conn_id,
            },
        )

    def _seconds_left(self) -> float | None:
        if not self.deadline_at:
            return None
        return (parse_time(self.deadline_at) - datetime.now(UTC)).total_seconds()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        store = CheckpointStore(self.base_uri, self.aws_conn_id)
        wanted = describe_wait(self.base_uri, self.newer_than_step, self.newer_than_time)
        errors, newest = 0, None
        while True:
            try:
                match, newest = await asyncio.to_thread(
                    find_newer, store, self.newer_than_step, self.newer_than_time, self.verify
                )
                errors = 0
            except Exception as exc:
                errors += 1
                self.log.warning("checkpoint poll %d/%d failed: %s", errors, MAX_CONSECUTIVE_ERRORS, exc)
                if errors >= MAX_CONSECUTIVE_ERRORS:
                    message = f"gave up waiting for {wanted}: {exc}"
                    yield TriggerEvent(CheckpointEvent("error", message).to_payload())
                    return
                match = None
            if match is not None:
                message = f"found {match.uri} (step {match.step})"
                yield TriggerEvent(CheckpointEvent("found", message, match.to_xcom()).to_payload())
                return
            left = self._seconds_left()
            if left is not None and left <= 0:
                seen = (
                    f"newest complete: step {newest.step} ({newest.uri})" if newest else "none complete yet"
                )
                message = f"deadline {self.deadline_at} passed without {wanted}; {seen}"
                yield TriggerEvent(CheckpointEvent("deadline", message).to_payload())
                return
            await asyncio.sleep(self.poke_interval if left is None else min(self.poke_interval, left))
