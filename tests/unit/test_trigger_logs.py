"""Log relay cursor: exact timestamp order and no duplicates across a reconnect (pure parts)."""

from __future__ import annotations

from airflow_k8s_ml.triggers.logs import (
    LineFilter,
    advance,
    since_time,
    split_timestamp,
    stream_keys,
    timestamp_key,
)


def test_split_timestamp() -> None:
    assert split_timestamp("2024-05-01T10:00:00.123456789Z step 1 loss=0.5") == (
        "2024-05-01T10:00:00.123456789Z",
        "step 1 loss=0.5",
    )
    assert split_timestamp("no stamp here") == ("", "no stamp here")


def test_timestamp_key_orders_nanoseconds() -> None:
    a = timestamp_key("2024-05-01T10:00:00.123456789Z")
    b = timestamp_key("2024-05-01T10:00:00.12345679Z")
    assert a is not None and b is not None and a < b
    assert timestamp_key("2024-05-01T12:00:00+02:00") == timestamp_key("2024-05-01T10:00:00Z")
    assert timestamp_key("garbage") is None


def test_filter_drops_what_was_relayed_before_the_reconnect() -> None:
    stamp = "2024-05-01T10:00:01.5Z"
    cursor = advance(advance(None, stamp), stamp)  # two lines carried exactly this timestamp
    assert cursor == {"ts": stamp, "n": 2}
    lines = ["2024-05-01T10:00:01.2Z", stamp, stamp, stamp, "2024-05-01T10:00:02Z"]
    line_filter = LineFilter(cursor)
    assert [line_filter.accept(s) for s in lines] == [False, False, False, True, True]


def test_no_cursor_accepts_everything_and_since_time_is_whole_seconds() -> None:
    assert LineFilter(None).accept("2024-05-01T10:00:01.2Z")
    assert since_time({"ts": "2024-05-01T10:00:01.123456789Z", "n": 1}) == "2024-05-01T10:00:01Z"
    assert since_time(None) is None


def test_stream_keys_prefix_by_replica() -> None:
    master = {
        "metadata": {
            "name": "pt-master-0",
            "labels": {
                "training.kubeflow.org/replica-type": "master",
                "training.kubeflow.org/replica-index": "0",
            },
        },
        "spec": {"containers": [{"name": "pytorch"}]},
    }
    job_pod = {"metadata": {"name": "ft-x7k2p"}, "spec": {"containers": [{"name": "main"}, {"name": "side"}]}}
    assert stream_keys(master) == [("pytorch", "master-0")]
    assert stream_keys(job_pod) == [("main", "ft-x7k2p/main"), ("side", "ft-x7k2p/side")]


def test_a_started_replica_deleted_before_any_stream_opened_is_named() -> None:
    """Its logs went with its pod (the clean pod policy stopped it as the workload ended): said, not silent;
    a replica that never started had nothing to lose, and one named is not named twice."""

    from airflow_k8s_ml.triggers.logs import LogRelay

    def worker(index: int, state: dict[str, object]) -> dict[str, object]:
        labels = {
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": str(index),
        }
        return {
            "metadata": {"name": f"tf-worker-{index}", "uid": f"u{index}", "labels": labels},
            "spec": {"containers": [{"name": "tensorflow"}]},
            "status": {"containerStatuses": [{"name": "tensorflow", "state": state}]},
        }

    warnings: list[str] = []

    class Log:
        def warning(self, message: str, *args: object) -> None:
            warnings.append(message % args)

    relay = LogRelay(None, "ml", Log())
    started = worker(1, {"running": {"startedAt": "2026-12-05T16:00:00Z"}})
    pending = worker(2, {"waiting": {"reason": "ContainerCreating"}})
    relay.never_read([started, pending])
    relay.never_read([started])
    assert warnings == [
        "[worker-1] logs not relayed: pod tf-worker-1 was deleted before the relay could read them "
        "(a replica still running when the workload ended is stopped by its clean pod policy)"
    ]
