"""How an answer leaves the API server: a JSON body, or a Status for an error.

Its own module so that whatever answers a request (the server's handlers, the subresource handlers the
controllers and the kubelet register, the admin endpoint) writes answers the same way without importing
the server.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from . import errors

JSON = "application/json"


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=JSON, headers=headers)


def status_response(err: errors.StatusError, headers: dict[str, str] | None = None) -> web.Response:
    """The one way an error leaves the server: its Status body, code and headers."""
    return json_response(err.status(), err.code, {**err.headers, **(headers or {})})
