"""Images are not pulled; the image rules decide. A denied image fails like a refusing registry."""

from __future__ import annotations

from kubernetes import client

from .pod_helpers import container_status, events_for, pod_body, read_log, wait_pod, waiting_reason, watch_pod


def test_denied_image_gives_err_image_pull_then_image_pull_back_off(
    core: client.CoreV1Api, namespace: str
) -> None:
    created = core.create_namespaced_pod(namespace, pod_body("denied", "pass", image="forbidden.example/x:1"))

    seen = watch_pod(
        core,
        namespace,
        "denied",
        lambda p: waiting_reason(p) == "ImagePullBackOff",
        since=created.metadata.resource_version,
    )
    reasons = [waiting_reason(p) for p in seen]
    assert "ErrImagePull" in reasons and reasons.index("ErrImagePull") < reasons.index("ImagePullBackOff")
    err = next(p for p in seen if waiting_reason(p) == "ErrImagePull")
    assert container_status(err).state.waiting.message.startswith(
        'Failed to pull image "forbidden.example/x:1": '
    )
    assert (
        container_status(seen[-1]).state.waiting.message == 'Back-off pulling image "forbidden.example/x:1"'
    )
    assert seen[-1].status.phase == "Pending"
    failed = [e.message for e in events_for(core, namespace, "denied") if e.reason == "Failed"]
    assert "Error: ErrImagePull" in failed and any(
        m.startswith('Failed to pull image "forbidden') for m in failed
    )

    pod = wait_pod(core, namespace, "denied", lambda p: waiting_reason(p) == "ImagePullBackOff")
    assert pod.status.phase == "Pending"
    try:
        read_log(core, namespace, "denied")
    except client.ApiException as exc:
        assert exc.status == 400
        assert 'container \\"main\\" in pod \\"denied\\" is waiting to start' in exc.body
    else:
        raise AssertionError("logs of a container that never started must be a 400")
