"""Images are recorded, not pulled: a configurable allow/deny map decides whether a "pull" succeeds.

Commands run on the host with the cluster's Python first on PATH, so an image only selects a rule: the
first rule whose glob matches wins (``fnmatch``), no rule means allowed. A denied image fails like a
registry refusing it (``ErrImagePull`` then ``ImagePullBackOff``), which makes those paths testable. A name
that is no image reference at all (``Trainer:1``: upper case) is refused before any rule, as the kubelet's
image manager refuses it (``InvalidImageName``), whatever the rules say.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import re
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


@functools.cache
def _reference() -> re.Pattern[str]:
    """distribution/reference's grammar (``ReferenceRegexp``): [domain/]path[:tag][@digest]."""
    alnum = r"[a-z0-9]+"
    separator = r"(?:[._]|__|[-]+)"
    component = rf"{alnum}(?:{separator}{alnum})*"
    domain_component = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
    host = rf"(?:{domain_component}(?:\.{domain_component})*|\[[a-fA-F0-9:]+\])"
    domain = rf"{host}(?::[0-9]+)?"
    name = rf"(?:{domain}/)?{component}(?:/{component})*"
    tag = r"[\w][\w.-]{0,127}"
    digest = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
    return re.compile(rf"^({name})(?::({tag}))?(?:@({digest}))?$")


def _remote(image: str) -> str:
    """``splitDockerDomain``'s remainder without the tag: the repository path as the kubelet names it
    (``library/`` prefixed for a Docker Hub name without a namespace)."""
    name = image.partition("@")[0]
    first, slash, rest = name.partition("/")
    plain = "." not in first and ":" not in first and first != "localhost" and first.lower() == first
    if not slash or plain:
        domain, remainder = "docker.io", name
    else:
        domain, remainder = first, rest
    if domain == "docker.io" and "/" not in remainder:
        remainder = "library/" + remainder
    return remainder.partition(":")[0]


def reference_error(image: str) -> str | None:
    """Why ``image`` is no image reference (``ParseNormalizedNamed``'s error), or None."""
    remote = _remote(image)
    if remote.lower() != remote:
        return f"invalid reference format: repository name ({remote}) must be lowercase"
    if not _reference().match(image):
        return "invalid reference format"
    return None


def pull(rules: list[ImageRule], image: str, policy: str) -> PullResult:
    """What the kubelet's image manager would report for ``image`` under ``policy``."""
    invalid = reference_error(image)
    if invalid is not None:  # pkg/kubelet/images/image_manager.go: applyDefaultImageTag
        message = (
            f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": {invalid}'
        )
        return PullResult(False, "InvalidImageName", message, (("Warning", "InspectFailed", message),))
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
