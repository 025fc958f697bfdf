"""Images are recorded, not pulled: a configurable allow/deny map decides whether a "pull" succeeds.

Commands run on the host with the cluster's Python first on PATH, so an image only selects a rule: the
first rule whose glob matches wins (``fnmatch``), no rule means allowed. A denied image fails like a
registry refusing it (``ErrImagePull`` then ``ImagePullBackOff``), which makes those paths testable.
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass

from ..settings import ImageRule


@dataclass(frozen=True)
class PullResult:
    ok: bool
    reason: str = ""  # ErrImagePull / ErrImageNeverPull when not ok
    message: str = ""  # the waiting message and the Failed event
    events: tuple[tuple[str, str, str], ...] = ()  # (type, reason, message) to record


def rule_for(rules: list[ImageRule], image: str) -> ImageRule | None:
    for rule in rules:
        if fnmatch.fnmatchcase(image, rule.pattern):
            return rule
    return None


def pull(rules: list[ImageRule], image: str, policy: str) -> PullResult:
    """What the kubelet's image manager would report for ``image`` under ``policy``."""
    rule = rule_for(rules, image)
    allowed = rule is None or rule.allow
    if policy == "Never":
        if allowed:
            return PullResult(
                True, events=(("Normal", "Pulled", f'Container image "{image}" already present on machine'),)
            )
        message = f'Container image "{image}" is not present with pull policy of Never'
        return PullResult(False, "ErrImageNeverPull", message, (("Warning", "ErrImageNeverPull", message),))
    if not allowed:
        message = _refusal(image, missing=rule is not None and rule.missing)
        return PullResult(
            False,
            "ErrImagePull",
            message,
            (
                ("Normal", "Pulling", f'Pulling image "{image}"'),
                ("Warning", "Failed", message),
                ("Warning", "Failed", "Error: ErrImagePull"),
            ),
        )
    if policy == "Always":
        return PullResult(
            True,
            events=(
                ("Normal", "Pulling", f'Pulling image "{image}"'),
                (
                    "Normal",
                    "Pulled",
                    f'Successfully pulled image "{image}" in 0s (0s including waiting). Image size: 0 bytes.',
                ),
            ),
        )
    return PullResult(
        True, events=(("Normal", "Pulled", f'Container image "{image}" already present on machine'),)
    )


def _refusal(image: str, *, missing: bool) -> str:
    """The kubelet's pull error for a refused image, worded as containerd words it (an image the registry
    does not have: ``NotFound``; else a denied pull)."""
    if missing:
        return (
            f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull and unpack '
            f'image "{image}": failed to resolve reference "{image}": {image}: not found'
        )
    return (
        f'Failed to pull image "{image}": rpc error: code = Unknown desc = failed to pull and unpack '
        f'image "{image}": pull access denied by the local cluster\'s image rules'
    )


def command_prefix(rules: list[ImageRule], image: str) -> tuple[str, ...]:
    rule = rule_for(rules, image)
    return rule.command_prefix if rule is not None else ()


def image_user(rules: list[ImageRule], image: str) -> int:
    """The image's USER: its rule's ``user``, else the cluster's own uid (see :mod:`.identity`)."""
    import os

    rule = rule_for(rules, image)
    return rule.user if rule is not None and rule.user is not None else os.geteuid()


def image_id(image: str) -> str:
    """A stable digest-style imageID (the image is never fetched, so the digest is of its name)."""
    name = image.partition("@")[0]
    return f"{name}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"
