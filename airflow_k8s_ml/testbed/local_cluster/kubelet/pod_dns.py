"""Pod DNS names (``<hostname>.<subdomain>``) in a container's environment, resolved to pod IPs.

Why: on a real cluster a pod with ``hostname`` and ``subdomain`` set is resolvable by cluster DNS as
``<hostname>.<subdomain>[.<namespace>.svc.cluster.local]`` through the headless Service named after the
subdomain (that is how a JobSet's pods, and Kubeflow Trainer's ``PET_MASTER_ADDR``, find each other). The
local cluster runs no DNS server and cannot edit ``/etc/hosts``, so the kubelet rewrites an environment
value that *is* such a name, under the pod's own subdomain, to the named pod's IP when it starts the
container, the same way PyTorchJob's ``MASTER_ADDR`` is given the Master's IP. The named pod's IP is taken
from the kubelet's allocator by pod uid (idempotent), so it is known before that pod's sandbox exists.
Pure apart from the resolver passed in.
"""

from __future__ import annotations

from collections.abc import Callable

Resolver = Callable[[str, str], str | None]  # (hostname, subdomain) -> pod IP, or None: no live pod


def named_host(value: str, namespace: str, subdomain: str) -> str | None:
    """The hostname ``value`` names under ``subdomain`` (short or fully qualified form), or None."""
    suffixes = (
        f".{subdomain}",
        f".{subdomain}.{namespace}",
        f".{subdomain}.{namespace}.svc",
        f".{subdomain}.{namespace}.svc.cluster.local",
    )
    for suffix in suffixes:
        host = value.removesuffix(suffix)
        if host != value and host and "." not in host:
            return host
    return None


def rewrite(env: dict[str, str], namespace: str, subdomain: str | None, resolve: Resolver) -> dict[str, str]:
    """``env`` with the pod DNS names that name a live pod replaced by its IP. A name no live pod answers
    to (not created yet, finished, terminating) is left as written: it does not resolve, as on a cluster
    whose DNS has no record for it, and the program fails or retries as it would there."""
    if not subdomain:
        return env
    out = dict(env)
    for key, value in env.items():
        host = named_host(value, namespace, subdomain)
        ip = resolve(host, subdomain) if host is not None else None
        if ip is not None:
            out[key] = ip
    return out
