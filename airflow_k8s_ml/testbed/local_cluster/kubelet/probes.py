"""Readiness, liveness and startup probes (httpGet, tcpSocket, exec) against the pod IP.

One :class:`ProbeLoop` per probe and running container instance. It applies the thresholds and
reports transitions only, so the kubelet writes status when readiness really changes. Periods and the
initial delay are multiplied by ``settings.probe_time_scale`` (tests shrink them); timeouts are not,
since a probe that answers is not slowed down by them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
Check = Callable[[], Awaitable[tuple[bool, str]]]
# Why the listener on the pod IP's port is not the pod's own (None: it is): see :mod:`.listeners`.
Ownership = Callable[[int], Awaitable[str | None]]


@dataclass(frozen=True)
class Target:
    """Where and how probes of one container run."""

    pod_ip: str
    ports: list[Obj]
    env: dict[str, str]
    cwd: str
    ownership: Ownership | None = None

    async def foreign(self, host: str, port: int) -> str | None:
        """A probe of the pod IP only counts if the pod's own process answered it."""
        if self.ownership is None or host != self.pod_ip:
            return None
        return await self.ownership(port)


def resolve_port(port: Any, ports: list[Obj]) -> int:
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        return int(port)
    for declared in ports:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise ValueError(f"unknown port name {port!r}")


def make_check(probe: Obj, target: Target) -> Check:
    timeout = float(probe.get("timeoutSeconds") or 1)
    if probe.get("httpGet") is not None:
        return lambda: _http(probe["httpGet"], target, timeout)
    if probe.get("tcpSocket") is not None:
        return lambda: _tcp(probe["tcpSocket"], target, timeout)
    if probe.get("exec") is not None:
        return lambda: _exec(probe["exec"].get("command") or [], target, timeout)

    async def unsupported() -> tuple[bool, str]:
        return False, "probe type not supported by the local cluster"

    return unsupported


async def _http(spec: Obj, target: Target, timeout: float) -> tuple[bool, str]:
    import aiohttp

    scheme = (spec.get("scheme") or "HTTP").lower()
    host = spec.get("host") or target.pod_ip
    try:
        port = resolve_port(spec.get("port"), target.ports)
    except ValueError as exc:
        return False, str(exc)
    path = spec.get("path") or "/"
    url = f"{scheme}://{host}:{port}{path if path.startswith('/') else '/' + path}"
    headers = {h.get("name", ""): h.get("value", "") for h in spec.get("httpHeaders") or []}
    headers.setdefault("User-Agent", "kube-probe/1.32")
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.get(
                url, headers=headers, ssl=ctx if scheme == "https" else False, allow_redirects=False
            ) as response,
        ):
            if 200 <= response.status < 400:
                foreign = await target.foreign(host, port)
                if foreign is not None:
                    return False, f'Get "{url}": {foreign}'
                return True, ""
            return False, f"HTTP probe failed with statuscode: {response.status}"
    except TimeoutError:
        return (
            False,
            f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
        )
    except aiohttp.ClientError:
        return False, f'Get "{url}": dial tcp {host}:{port}: connect: connection refused'


async def _tcp(spec: Obj, target: Target, timeout: float) -> tuple[bool, str]:
    host = spec.get("host") or target.pod_ip
    try:
        port = resolve_port(spec.get("port"), target.ports)
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError, ValueError):
        return False, f"dial tcp {host}:{spec.get('port')}: connect: connection refused"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    foreign = await target.foreign(host, port)
    if foreign is not None:
        return False, f"dial tcp {host}:{port}: {foreign}"
    return True, ""


async def _exec(command: list[str], target: Target, timeout: float) -> tuple[bool, str]:
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            env=target.env,
            cwd=target.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return False, str(exc)
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return False, f'command timed out: "{" ".join(command)}" timed out after {timeout:g}s'
    return proc.returncode == 0, output.decode(errors="replace")


class ProbeLoop:
    """Runs one probe periodically; calls ``on_change(ok, message)`` when the thresholded result flips
    and ``on_failure(message)`` on every failed attempt (the kubelet's ``Unhealthy`` event)."""

    def __init__(
        self,
        probe: Obj,
        check: Check,
        scale: float,
        initial: bool,
        on_change: Callable[[bool, str], None],
        on_failure: Callable[[str], None],
    ) -> None:
        self._probe = probe
        self._check = check
        self._scale = scale
        self.state = initial
        self._on_change = on_change
        self._on_failure = on_failure

    async def run(self) -> None:
        probe, scale = self._probe, self._scale
        period = float(probe.get("periodSeconds") or 10) * scale
        success_needed = int(probe.get("successThreshold") or 1)
        failure_needed = int(probe.get("failureThreshold") or 3)
        await asyncio.sleep(float(probe.get("initialDelaySeconds") or 0) * scale)
        successes = failures = 0
        while True:
            ok, message = await self._check()
            if ok:
                successes, failures = successes + 1, 0
                if not self.state and successes >= success_needed:
                    self._flip(True, "")
            else:
                successes, failures = 0, failures + 1
                self._on_failure(message)
                if (self.state and failures >= failure_needed) or (
                    not self.state and failures == failure_needed
                ):
                    self._flip(False, message)
            await asyncio.sleep(period)

    def _flip(self, state: bool, message: str) -> None:
        changed = state != self.state
        self.state = state
        if changed or not state:
            self._on_change(state, message)
