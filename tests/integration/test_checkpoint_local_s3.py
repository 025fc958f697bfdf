"""The embedded S3 endpoint: the S3 behaviours checkpoints rely on, and the foreground command.

These pin down what we use from moto (conditional create, SHA-256 checksums reported without a download) so a
moto upgrade that changes them fails here, next to the explanation, rather than deep in a gate test.
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time

import botocore.exceptions
import pytest

from airflow_k8s_ml.testbed.local_s3 import LocalS3


def test_conditional_create_is_atomic_under_concurrency(
    local_s3: LocalS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto checks If-None-Match:* and then writes, unlocked; local_s3 holds a lock across both.

    To make the race deterministic rather than lucky, moto's write is slowed down (fault injection in the
    server, not in our code): without the lock all 8 writers pass the existence check during the pause.
    """
    from moto.s3.models import S3Backend as MotoS3Backend

    original = MotoS3Backend.put_object

    def slow_put_object(self, bucket_name, key_name, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(key_name).startswith("slow-race/"):
            time.sleep(0.05)
        return original(self, bucket_name, key_name, *args, **kwargs)

    monkeypatch.setattr(MotoS3Backend, "put_object", slow_put_object)
    clients = [local_s3.client() for _ in range(8)]
    barrier, wins, codes = threading.Barrier(8), [], []

    def put(i: int) -> None:
        barrier.wait()
        try:
            clients[i].put_object(
                Bucket=s3_bucket, Key="slow-race/MANIFEST.json", Body=b"%d" % i, IfNoneMatch="*"
            )
            wins.append(i)
        except botocore.exceptions.ClientError as exc:
            codes.append(exc.response["Error"]["Code"])

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and codes == ["PreconditionFailed"] * 7
    body = clients[0].get_object(Bucket=s3_bucket, Key="slow-race/MANIFEST.json")["Body"].read()
    assert body == b"%d" % wins[0]


def test_sha256_checksum_is_reported_by_head_and_get_object_attributes(
    local_s3: LocalS3, s3_bucket: str
) -> None:
    body = os.urandom(1000)
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    client = local_s3.client()
    client.put_object(Bucket=s3_bucket, Key="k", Body=body, ChecksumAlgorithm="SHA256", ChecksumSHA256=digest)
    head = client.head_object(Bucket=s3_bucket, Key="k", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == digest and head["ContentLength"] == 1000
    attrs = client.get_object_attributes(
        Bucket=s3_bucket, Key="k", ObjectAttributes=["Checksum", "ObjectSize"]
    )
    assert attrs["Checksum"]["ChecksumSHA256"] == digest


def test_credentials_shapes(local_s3: LocalS3) -> None:
    creds = local_s3.credentials
    assert creds.env()["AWS_ENDPOINT_URL"] == local_s3.endpoint_url
    secret = creds.secret_manifest("s3", "ml")
    assert secret["kind"] == "Secret" and secret["metadata"]["namespace"] == "ml"
    assert secret["stringData"] == creds.env()


@pytest.mark.timeout(60)
def test_foreground_command_serves_until_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_k8s_ml.testbed.local_s3", "--port", "0", "--bucket", "demo"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        exports = dict(proc.stdout.readline().removeprefix("export ").strip().split("=", 1) for _ in range(4))
        endpoint = exports["AWS_ENDPOINT_URL"]
        assert endpoint.startswith("http://127.0.0.1:")
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"],
            region_name=exports["AWS_DEFAULT_REGION"],
        )
        assert [b["Name"] for b in client.list_buckets()["Buckets"]] == ["demo"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
