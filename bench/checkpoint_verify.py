"""Checkpoint verify cost: ``checksums`` (zero-download) vs ``full`` (stream and hash) on the embedded S3.

What it prints: the time to commit one checkpoint of ``--shards`` random shards (64 x 4 MiB = 256 MiB by
default) with :class:`~airflow_k8s_ml.checkpoints.CheckpointWriter`, then, for each verify mode of
:class:`~airflow_k8s_ml.checkpoints.CheckpointStore`: the requests made (by S3 operation), the bytes
downloaded and the wall time.

Method: everything is counted at the client, with botocore event hooks on a boto3 client of its own per
phase (so the commit's requests never count as the verify's):

- ``before-send.s3.*`` counts HTTP requests (retries included), ``after-call.s3.*`` counts API calls;
- bytes downloaded = what was read from GetObject bodies (the body is wrapped by a counting proxy in the
  ``after-call`` hook, through ``read``/``iter_chunks`` only), cross-checked with the sum of GetObject
  ``Content-Length``; the XML/JSON bodies of the other operations (listings) are reported apart, and
  HeadObject has no body.

Shards are generated on the fly into a temp dir (1 MiB of ``os.urandom`` at a time, so memory stays small)
and uploaded from their paths. The server is moto in this process (``LocalS3``, loopback only), so its CPU
competes with the client's: figures are for comparing the modes, not for absolute S3 throughput. Bounded:
``--timeout`` (default 600 s) aborts the run; the temp dir and the server are removed in every case.

    python bench/checkpoint_verify.py [--shards 64] [--shard-mib 4] [--workers 8] [--timeout 600]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_k8s_ml.checkpoints import CheckpointStore, CheckpointWriter
from airflow_k8s_ml.testbed.local_s3 import LocalS3

MiB = 1024 * 1024
BUCKET = "bench-checkpoints"
BASE = f"s3://{BUCKET}/verify-bench"


# -- counting at the client ----------------------------------------------------------------------------
class CountingBody:
    """A GetObject body that adds what the caller reads to the meter (public StreamingBody API only)."""

    def __init__(self, body: Any, meter: S3Meter, manifest: bool) -> None:
        self._body = body
        self._meter = meter
        self._manifest = manifest

    def read(self, amt: int | None = None) -> bytes:
        chunk = self._body.read(amt)
        self._meter.add_body_bytes(len(chunk), self._manifest)
        return bytes(chunk)

    def iter_chunks(self, chunk_size: int = 1024) -> Iterator[bytes]:
        while chunk := self.read(chunk_size):
            yield chunk

    def close(self) -> None:
        self._body.close()

    def __enter__(self) -> CountingBody:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._body, name)


@dataclass
class S3Meter:
    """Requests and bytes seen by one boto3 client (thread-safe: verify runs its requests in a pool)."""

    http_requests: Counter[str] = field(default_factory=Counter)
    api_calls: Counter[str] = field(default_factory=Counter)
    body_bytes: int = 0  # everything read from GetObject bodies
    manifest_bytes: int = 0  # of which MANIFEST.json
    get_content_length: int = 0  # sum of GetObject Content-Length headers
    other_body_bytes: int = 0  # response bodies of every other operation (listing XML, errors)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any) -> Any:
        events = client.meta.events
        events.register("before-parameter-build.s3.GetObject", self._remember_key)
        events.register("before-send.s3.*", self._before_send)
        events.register("after-call.s3.*", self._after_call)
        return client

    def add_body_bytes(self, n: int, manifest: bool) -> None:
        with self._lock:
            self.body_bytes += n
            if manifest:
                self.manifest_bytes += n

    def _remember_key(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_key"] = str(params.get("Key", ""))  # after-call gets the same context

    def _before_send(self, event_name: str, **_: Any) -> None:  # must return None: a value short-circuits
        with self._lock:
            self.http_requests[event_name.rsplit(".", 1)[-1]] += 1

    def _after_call(
        self, event_name: str, http_response: Any, parsed: Any, context: dict[str, Any], **_: Any
    ) -> None:
        op = event_name.rsplit(".", 1)[-1]
        with self._lock:
            self.api_calls[op] += 1
            if op == "GetObject":
                self.get_content_length += int(http_response.headers.get("Content-Length", 0))
            else:
                self.other_body_bytes += len(http_response.content or b"")
        if op == "GetObject" and isinstance(parsed, dict) and "Body" in parsed:
            manifest = context.get("bench_key", "").endswith("/MANIFEST.json")
            parsed["Body"] = CountingBody(parsed["Body"], self, manifest)


# -- the run -------------------------------------------------------------------------------------------
def write_shards(folder: Path, shards: int, shard_bytes: int) -> dict[str, str]:
    """Random shard files, written 1 MiB at a time; returns checkpoint path -> local path."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for i in range(shards):
        path = folder / f"shard-{i:03d}.bin"
        with open(path, "wb") as out:
            left = shard_bytes
            while left:
                n = min(MiB, left)
                out.write(os.urandom(n))
                left -= n
        files[f"shards/shard-{i:03d}.bin"] = str(path)
    return files


def fmt_bytes(n: int) -> str:
    return f"{n:,} B ({n / MiB:.2f} MiB)"


def report_verify(mode: str, meter: S3Meter, seconds: float, problems: list[str]) -> None:
    ops = ", ".join(f"{op} {n}" for op, n in sorted(meter.http_requests.items()))
    print(f"\nverify mode={mode}")
    print(f"  requests (HTTP)  : {sum(meter.http_requests.values())}  [{ops}]")
    if meter.api_calls != meter.http_requests:
        print(f"  API calls        : {dict(meter.api_calls)} (differs from HTTP requests: retries)")
    print(f"  bytes downloaded : {fmt_bytes(meter.body_bytes)} read from GetObject bodies")
    print(f"    of which MANIFEST.json: {fmt_bytes(meter.manifest_bytes)}")
    print(f"    of which shard data   : {fmt_bytes(meter.body_bytes - meter.manifest_bytes)}")
    print(f"    GetObject Content-Length sum: {fmt_bytes(meter.get_content_length)}")
    print(f"    other response bodies (listing XML): {fmt_bytes(meter.other_body_bytes)}")
    print(f"  wall time        : {seconds:.3f} s")
    print(f"  problems         : {len(problems)}" + (f"  {problems[:3]}" if problems else ""))


def client_for(s3: LocalS3, workers: int) -> Any:
    """A fresh boto3 client with a pool big enough for ``workers`` parallel requests, and timeouts."""
    import boto3
    from botocore.config import Config

    creds = s3.credentials
    config = Config(
        max_pool_connections=max(10, workers + 2),
        connect_timeout=10,
        read_timeout=120,
        retries={"max_attempts": 3, "mode": "standard"},
    )
    session = boto3.session.Session(
        aws_access_key_id=creds.access_key_id,
        aws_secret_access_key=creds.secret_access_key,
        region_name=creds.region,
    )
    return session.client("s3", endpoint_url=creds.endpoint_url, config=config)


def run(args: argparse.Namespace) -> None:
    shard_bytes = int(args.shard_mib * MiB)
    total = shard_bytes * args.shards
    tmp = Path(tempfile.mkdtemp(prefix="ckpt-verify-bench-"))
    try:
        with LocalS3(buckets=[BUCKET]) as s3:
            print(f"embedded S3 (moto) at {s3.endpoint_url}; checkpoint under {BASE}")
            print(f"checkpoint: {args.shards} shards x {fmt_bytes(shard_bytes)} = {fmt_bytes(total)}")

            started = time.perf_counter()
            files = write_shards(tmp / "shards", args.shards, shard_bytes)
            print(f"shard generation (local disk): {time.perf_counter() - started:.3f} s")

            commit_meter = S3Meter()
            writer = CheckpointWriter(
                BASE, s3_client=commit_meter.attach(client_for(s3, args.workers)), max_workers=args.workers
            )
            started = time.perf_counter()
            uri = writer.commit(1, files, metrics={"loss": 0.5}, framework="bench")
            commit_seconds = time.perf_counter() - started
            ops = ", ".join(f"{op} {n}" for op, n in sorted(commit_meter.http_requests.items()))
            print(f"\ncommit {uri}")
            print(f"  requests (HTTP)  : {sum(commit_meter.http_requests.values())}  [{ops}]")
            print(f"  wall time        : {commit_seconds:.3f} s ({total / MiB / commit_seconds:.1f} MiB/s)")
            shutil.rmtree(tmp / "shards")  # uploaded; free the disk before verifying

            for mode in ("checksums", "full"):
                meter = S3Meter()
                store = CheckpointStore(
                    BASE,
                    aws_conn_id=None,
                    s3_client=meter.attach(client_for(s3, args.workers)),
                    max_workers=args.workers,
                )
                started = time.perf_counter()
                problems = store.verify(uri, mode=mode)
                report_verify(mode, meter, time.perf_counter() - started, problems)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--shard-mib", type=float, default=4.0, help="size of each shard in MiB")
    parser.add_argument("--workers", type=int, default=8, help="parallel uploads / verify requests")
    parser.add_argument("--timeout", type=int, default=600, help="abort the whole run after this many s")
    args = parser.parse_args(argv)

    def expired(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"benchmark exceeded --timeout {args.timeout}s")

    signal.signal(signal.SIGALRM, expired)
    signal.alarm(args.timeout)
    try:
        run(args)
    finally:
        signal.alarm(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
