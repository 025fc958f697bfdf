"""A follower of a container's log gets every line the container wrote, also when the pod was deleted (its
files removed) while the follower was behind: the kubelet's follower holds its file open, and so does ours.
CI once lost a TFJob worker's last line that way (the cleanPodPolicy deleted the pod as it exited)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from airflow_k8s_ml.testbed.local_cluster.kubelet.logfile import LogSink
from airflow_k8s_ml.testbed.local_cluster.kubelet.logs import LogOptions, copy_log


def test_a_follower_reads_to_the_end_after_the_pod_directory_is_removed(tmp_path: Path) -> None:
    async def scenario() -> bytes:
        pod_dir = tmp_path / "pod"
        sink = LogSink(pod_dir / "logs" / "main" / "c1.log")
        received: list[bytes] = []
        first = asyncio.Event()

        async def write(chunk: bytes) -> None:
            received.append(chunk)
            first.set()

        sink.write("stdout", b"line 1")
        options = LogOptions("main", True, False, None, None, None, False)
        follower = asyncio.create_task(copy_log(sink.path, sink, options, write))
        await asyncio.wait_for(first.wait(), 10)
        shutil.rmtree(pod_dir)  # the pod deleted: its files go at once
        sink.write("stdout", b"line 2")
        sink.write("stdout", b"reported to the coordinator")
        await sink.close()
        await asyncio.wait_for(follower, 10)
        return b"".join(received)

    assert asyncio.run(scenario()) == b"line 1\nline 2\nreported to the coordinator\n"
