"""Pod subresources the local cluster does not serve (``attach``), answered
clearly instead of with a bare 404: containers are host processes without a TTY or network namespace."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from .. import errors, routing

UNSUPPORTED = ("attach",)


def unsupported_handler(
    subresource: str,
) -> Callable[[web.Request, routing.Target], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request, target: routing.Target) -> web.StreamResponse:
        raise errors.bad_request(
            f"pods/{subresource} is not supported by the local cluster: containers run as local processes; "
            f"read output with pods/log, or reach pod {target.name} at its pod IP"
        )

    return handle
