"""An embedded S3 endpoint for the demo and the tests: moto's server on 127.0.0.1, spoken to over real HTTP.

Clients (boto3 in pods, the amazon provider's connection in Airflow) cannot tell it from S3 or MinIO, so the
checkpoint code has one path for all three. Start it as a context manager::

    with LocalS3(buckets=["models"]) as s3:
        os.environ.update(s3.credentials.env())

or in the foreground: ``python -m airflow_k8s_ml.testbed.local_s3 --port 9000 --bucket models``.

One gap in moto is patched here, minimally (see ``docs/checkpoints.md``): moto checks ``If-None-Match: *``
and then writes, without holding a lock between the two, so two concurrent conditional PUTs can both succeed.
:func:`install_moto_patches` serialises object writes so the check and the write are atomic, as on S3.
Note that moto keeps its state per process: two servers started in one process share their buckets.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import signal
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

DEFAULT_REGION = "us-east-1"
ACCESS_KEY_ID = "airflow-k8s-ml"
SECRET_ACCESS_KEY = "airflow-k8s-ml-local-secret"
_WRITE_LOCK = threading.RLock()
_PATCH_LOCK = threading.Lock()
_LOCKED_WRITES = (
    "put_object",
    "_key_response_post",
)  # single PUT; CompleteMultipartUpload (also If-None-Match)


@dataclass(frozen=True)
class S3Credentials:
    """Where and how to reach an S3 endpoint, in the shapes the two sides consume."""

    endpoint_url: str
    access_key_id: str = ACCESS_KEY_ID
    secret_access_key: str = SECRET_ACCESS_KEY
    region: str = DEFAULT_REGION

    def env(self) -> dict[str, str]:
        """Standard AWS variables; boto3 (>= 1.28) honours ``AWS_ENDPOINT_URL`` without code changes."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_DEFAULT_REGION": self.region,
        }

    def airflow_connection(self) -> str:
        """JSON for ``AIRFLOW_CONN_AWS_DEFAULT``: an ``aws`` connection with ``endpoint_url`` in the extra."""
        return json.dumps(
            {
                "conn_type": "aws",
                "login": self.access_key_id,
                "password": self.secret_access_key,
                "extra": {"endpoint_url": self.endpoint_url, "region_name": self.region},
            }
        )

    def secret_manifest(self, name: str = "s3-credentials", namespace: str = "default") -> dict[str, Any]:
        """A Kubernetes Secret carrying :meth:`env`, for pods to use via ``env_from: [{secretRef: ...}]``."""
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/part-of": "airflow-k8s-ml"},
            },
            "type": "Opaque",
            "stringData": self.env(),
        }


def install_moto_patches() -> None:
    """Make moto's conditional writes atomic (idempotent; affects moto in this process only).

    moto 5.x evaluates ``If-None-Match: *`` by looking the key up and then storing the object; concurrent
    requests interleave between the two steps (observed: 2 of 8 racing writers "won"). Holding one lock across
    each object write restores S3's guarantee that exactly one conditional create succeeds.
    """
    from moto.s3.responses import S3Response

    with _PATCH_LOCK:
        if getattr(S3Response, "_airflow_k8s_ml_locked", False):
            return
        for name in _LOCKED_WRITES:
            setattr(S3Response, name, _locked(getattr(S3Response, name)))
        S3Response._airflow_k8s_ml_locked = True  # type: ignore[attr-defined]


def _locked(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _WRITE_LOCK:
            return method(self, *args, **kwargs)

    return wrapper


class LocalS3:
    """moto's ``ThreadedMotoServer`` on a loopback port (0 = a free one), plus the credentials to use it."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        buckets: Iterable[str] = (),
        region: str = DEFAULT_REGION,
        quiet: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self.region = region
        self.buckets = list(buckets)
        self.quiet = quiet
        self._server: Any = None
        self._session: Any = None
        self._session_lock = threading.Lock()

    @property
    def endpoint_url(self) -> str:
        if self._server is None:
            raise RuntimeError("LocalS3 is not started")
        host, port = self._server.get_host_and_port()
        return f"http://{host}:{port}"

    @property
    def credentials(self) -> S3Credentials:
        return S3Credentials(self.endpoint_url, region=self.region)

    def start(self) -> LocalS3:
        from moto.server import ThreadedMotoServer

        if self._server is not None:
            return self
        install_moto_patches()
        if self.quiet:
            logging.getLogger("werkzeug").setLevel(
                logging.WARNING
            )  # one access-log line per request otherwise
        server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=not self.quiet)
        server.start()
        self._server = server
        for bucket in self.buckets:
            self.create_bucket(bucket)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def client(self) -> Any:
        """A new boto3 S3 client for this endpoint (thread-safe to call: one shared session, under a lock).

        Sharing the session caches botocore's service model, so a test that builds eight clients for eight
        racing writers does not parse it eight times.
        """
        import boto3

        creds = self.credentials
        with self._session_lock:
            if self._session is None:
                self._session = boto3.session.Session(
                    aws_access_key_id=creds.access_key_id,
                    aws_secret_access_key=creds.secret_access_key,
                    region_name=creds.region,
                )
            return self._session.client("s3", endpoint_url=creds.endpoint_url)

    def create_bucket(self, name: str) -> None:
        """Create ``name`` if missing (idempotent, so a restarted demo does not fail)."""
        client = self.client()
        exists = (client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists)
        with contextlib.suppress(*exists):
            client.create_bucket(Bucket=name)

    def reset(self) -> None:
        """Drop every bucket and object (moto's reset endpoint): a clean slate between test modules."""
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the endpoint in the foreground until SIGINT/SIGTERM; print how to reach it."""
    parser = argparse.ArgumentParser(
        prog="python -m airflow_k8s_ml.testbed.local_s3", description=main.__doc__
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--bucket", action="append", default=[], help="bucket to create (repeatable)")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with LocalS3(args.host, args.port, buckets=args.bucket, quiet=not args.verbose) as s3:
        for key, value in s3.credentials.env().items():
            print(f"export {key}={value}", flush=True)
        print(f"export AIRFLOW_CONN_AWS_DEFAULT='{s3.credentials.airflow_connection()}'", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
