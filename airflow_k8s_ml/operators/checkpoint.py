"""``CheckpointCheckOperator``: the gate between training and deploy.

Finds the newest complete checkpoint under a base URI, verifies it (zero-download checksums by default),
applies metric rules and pushes ``{"uri", "step", "metrics", "created_at"}`` for the deploy task. The policy
itself lives in :func:`airflow_k8s_ml.checkpoints.gate.check_gate`; this class only wires Airflow to it.
The store and the gate are imported in ``execute``: DAG parsing only checks the arguments, and imports the
URI and rule parsers only for literal values (a templated base or rule set is checked once rendered).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_k8s_ml.checkpoints.integrity import check_mode
from airflow_k8s_ml.manifests.validation import check_bool
from airflow_k8s_ml.operators.links import ApprovedCheckpointLink


def _templated(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


class CheckpointCheckOperator(BaseOperator):
    """Gate the newest complete checkpoint under ``base_uri`` on ``metric_rules``.

    Fails (CheckpointError) if there is no complete checkpoint, or if a *newer* one is incomplete or corrupt -
    unless ``allow_older=True``, which gates the older one and says so in the log and in the XCom
    (``skipped_newer``, ``note``). Fails (MetricGateFailed) listing every failed rule with the value seen.

    :param base_uri: ``s3://bucket/prefix`` or ``file:///abs/dir`` (templated).
    :param metric_rules: e.g. ``{"val_accuracy": ">= 0.90", "loss": "< 0.5"}`` (templated); a missing metric
        fails its rule.
    :param verify: ``checksums`` (default: compare the S3-stored SHA-256 with the manifest, zero bytes
        downloaded), ``full`` (download and hash) or ``none`` (manifest + listing only).
    """

    template_fields: Sequence[str] = ("base_uri", "metric_rules")
    ui_color = "#e8f4e8"
    operator_extra_links = (ApprovedCheckpointLink(),)

    def __init__(
        self,
        *,
        base_uri: str,
        metric_rules: Mapping[str, str] | str | None = None,
        verify: str = "checksums",
        allow_older: bool = False,
        aws_conn_id: str | None = "aws_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not _templated(base_uri):
            from airflow_k8s_ml.checkpoints.uri import parse_uri

            parse_uri(base_uri, "base_uri")
        literal = metric_rules.values() if isinstance(metric_rules, Mapping) else [metric_rules]
        if not any(_templated(v) for v in literal):
            from airflow_k8s_ml.checkpoints.rules import parse_rules

            parse_rules(metric_rules)  # fail at DAG parse time, not at 3 a.m.
        self.base_uri = base_uri
        self.metric_rules = metric_rules
        self.verify = check_mode(verify)
        self.allow_older = check_bool(allow_older, "allow_older")
        self.aws_conn_id = aws_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_k8s_ml.checkpoints.gate import check_gate
        from airflow_k8s_ml.checkpoints.rules import parse_rules
        from airflow_k8s_ml.checkpoints.store import CheckpointStore

        rules = parse_rules(self.metric_rules)
        store = CheckpointStore(self.base_uri, self.aws_conn_id)
        result = check_gate(store.scan(self.verify), rules, self.allow_older, store.base_uri)
        if result.note:
            self.log.warning("%s", result.note)
        checkpoint = result.checkpoint
        self.log.info(
            "checkpoint step-%s (%s) passed %d metric rule(s) with verify=%s; metrics %s",
            checkpoint.step,
            checkpoint.uri,
            len(rules),
            self.verify,
            checkpoint.metrics,
        )
        return result.to_xcom()
