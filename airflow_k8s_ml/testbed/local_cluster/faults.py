"""Fault injection, so clients' retry, back-off and watch-resume paths can be tested for real.

Configured through ``POST /admin/faults`` (JSON below) or in-process. Rules match by verb and resource
(fnmatch globs) and fail a share of matching requests with 429 (with Retry-After), 500, 503 or 404 (as
for an API group the server does not serve).

    {"rules": [{"verbs": "WATCH", "resources": "jobs", "code": 429, "share": 0.5, "retry_after": 1,
                "limit": 10}],
     "close_watches_after": 2.0, "expire_resumes": true}
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
    expire_resumes: bool = False
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def configure(self, spec: dict[str, Any]) -> None:
        known = set(FaultRule.__dataclass_fields__) - {"fired"}
        self.rules = [FaultRule(**{k: v for k, v in r.items() if k in known}) for r in spec.get("rules", [])]
        self.close_watches_after = spec.get("close_watches_after")
        self.expire_resumes = bool(spec.get("expire_resumes", False))

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

    def describe(self) -> dict[str, Any]:
        return {
            "rules": [r.__dict__ | {} for r in self.rules],
            "close_watches_after": self.close_watches_after,
            "expire_resumes": self.expire_resumes,
        }
