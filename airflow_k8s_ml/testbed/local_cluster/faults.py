"""Fault injection, so clients' retry, back-off and watch-resume paths can be tested for real.

Configured through ``POST /admin/faults`` (JSON below) or in-process. Rules match by verb and resource
(fnmatch globs) and fail a share of matching requests with 429 (with Retry-After), 500, 503 or 404 (as
for an API group the server does not serve).

    {"rules": [{"verbs": "WATCH", "resources": "jobs", "code": 429, "share": 0.5, "retry_after": 1,
                "limit": 10}],
     "close_watches_after": 2.0, "expire_resumes": true}

``expire_resumes``: true answers every watch resume 410 Gone; a number N only the first N.

Every fault is counted where it is injected (each rule's ``fired``; ``closed_watches`` and
``expired_resumes`` for the two watch faults) and the counts are part of ``GET /admin/faults``, so a test
proves the faults it configured really fired rather than passing on a quiet run.
"""

from __future__ import annotations

import fnmatch
import random
from dataclasses import dataclass, field
from typing import Any

from . import errors


@dataclass
class FaultRule:
    verbs: str = "*"
    resources: str = "*"
    code: int = 500
    share: float = 1.0
    retry_after: int = 1
    limit: int | None = None  # stop after this many injected failures
    fired: int = 0

    def error(self) -> errors.StatusError:
        if self.code == 429:
            return errors.too_many_requests(self.retry_after)
        if self.code == 503:
            return errors.service_unavailable()
        if self.code == 404:  # what an API server answers for a group it does not serve
            return errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        return errors.internal_error("injected fault")


@dataclass
class Faults:
    rules: list[FaultRule] = field(default_factory=list)
    close_watches_after: float | None = None
    expire_resumes: bool | int = False
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    closed_watches: int = 0
    expired_resumes: int = 0

    def configure(self, spec: dict[str, Any]) -> None:
        known = set(FaultRule.__dataclass_fields__) - {"fired"}
        self.rules = [FaultRule(**{k: v for k, v in r.items() if k in known}) for r in spec.get("rules", [])]
        self.close_watches_after = spec.get("close_watches_after")
        expire = spec.get("expire_resumes", False)
        self.expire_resumes = expire if isinstance(expire, bool | int) else bool(expire)
        self.closed_watches = self.expired_resumes = 0

    def clear(self) -> None:
        self.configure({})

    def check(self, verb: str, resource: str) -> None:
        """Raise the injected error if a rule fires for this request."""
        for rule in self.rules:
            if rule.limit is not None and rule.fired >= rule.limit:
                continue
            if fnmatch.fnmatch(verb, rule.verbs) and fnmatch.fnmatch(resource, rule.resources):
                if self.rng.random() < rule.share:
                    rule.fired += 1
                    raise rule.error()

    def expires_resume(self) -> bool:
        """Whether a watch resuming from a resourceVersion is answered 410 Gone (counted when it is):
        every resume when ``expire_resumes`` is true, the first N when it is a number N (so the watches
        after them live, and a ``close_watches_after`` beside it still has watches to close)."""
        limit = self.expire_resumes
        expired = limit is True or (type(limit) is int and self.expired_resumes < limit)
        self.expired_resumes += expired
        return expired

    def note_closed_watch(self) -> None:
        """A watch the server ended at ``close_watches_after`` (not at the client's own timeout)."""
        self.closed_watches += 1

    def describe(self) -> dict[str, Any]:
        return {
            "rules": [r.__dict__ | {} for r in self.rules],
            "close_watches_after": self.close_watches_after,
            "expire_resumes": self.expire_resumes,
            "closed_watches": self.closed_watches,
            "expired_resumes": self.expired_resumes,
        }
