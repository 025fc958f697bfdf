"""What we send, checked strictly against upstream's published schemas: an unknown field fails, with its path.

Why: the local cluster refuses unknown fields under ``Strict``, but its schemas are our own reading of
upstream. This module is the second opinion, from upstream's own published artefacts:

- built-in kinds: ``kubernetes-validate``'s strict JSON schemas (generated from Kubernetes' OpenAPI), for the
  oldest and the newest Kubernetes minor we support (:data:`KUBERNETES_VERSIONS`);
- ``kubeflow.org/v1`` PyTorchJob and TFJob: the models of ``kubeflow-training`` (the training operator's SDK,
  generated from its OpenAPI; pod templates resolve to the official client's models);
- ``trainer.kubeflow.org/v1alpha1`` TrainJob: the pydantic models of ``kubeflow-trainer-api``.

Kinds with no published schema here (Kueue's, JobSet, the runtimes) are not checked (:func:`problems` says
None). Pure: no I/O; the plugin (tests/upstream_schemas_plugin.py) feeds it what the clients send.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from typing import Any

#: The oldest and the newest Kubernetes minor we support (docs/real-cluster.md): the objects we send must
#: be valid in both. The newest is the newest schema kubernetes-validate ships.
OLDEST_KUBERNETES = "1.30.0"

Obj = dict[str, Any]

_BUILT_IN_GROUPS = {
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "scheduling.k8s.io",
    "discovery.k8s.io",
}


def kubernetes_versions() -> tuple[str, str]:
    import kubernetes_validate

    return (OLDEST_KUBERNETES, kubernetes_validate.latest_version())


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


#: The training operator SDK's model of each ``kubeflow.org/v1`` kind we render.
_KUBEFLOW_V1_MODELS = {"PyTorchJob": "KubeflowOrgV1PyTorchJob", "TFJob": "KubeflowOrgV1TFJob"}


def schema_of(obj: Obj) -> str | None:
    """Which published schema checks ``obj``: ``kubernetes``, ``kubeflow-training``, ``kubeflow-trainer-api``
    or None (no published schema here)."""
    api_version, kind = str(obj.get("apiVersion", "")), obj.get("kind")
    if _group(api_version) in _BUILT_IN_GROUPS:
        return "kubernetes"
    if api_version == "kubeflow.org/v1" and kind in _KUBEFLOW_V1_MODELS:
        return "kubeflow-training"
    if api_version == "trainer.kubeflow.org/v1alpha1" and kind == "TrainJob":
        return "kubeflow-trainer-api"
    return None


def problems(obj: Obj) -> list[str] | None:
    """What upstream's schema says is wrong with ``obj`` (each message names the field's path); [] when it
    is valid, None when no published schema covers its kind."""
    which = schema_of(obj)
    if which == "kubernetes":
        return _kubernetes(obj)
    if which == "kubeflow-training":
        return list(_openapi_models(obj, _KUBEFLOW_V1_MODELS[str(obj.get("kind"))], ""))
    if which == "kubeflow-trainer-api":
        return _trainer(obj)
    return None


# -- built-in kinds ---------------------------------------------------------------------------------------
def _kubernetes(obj: Obj) -> list[str]:
    import kubernetes_validate

    found = []
    for version in kubernetes_versions():
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError as exc:
            found.append(f"Kubernetes {version}: {exc}")
        except kubernetes_validate.ValidationError as exc:
            path = _dotted(exc.absolute_path) or "(root)"
            found.append(f"Kubernetes {version}: {path}: {exc.message}")
    return found


def _dotted(parts: Any) -> str:
    """``spec.template.spec.containers[0].imagePullPolcy``, as the API server names a field."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# -- PyTorchJob: the training operator SDK's OpenAPI models -----------------------------------------------
_PRIMITIVE = {"str", "int", "float", "bool", "object", "datetime", "date"}


def _model_class(name: str) -> Any:
    from kubeflow.training import models as kubeflow_models
    from kubernetes.client import models as kubernetes_models

    return getattr(kubeflow_models, name, None) or getattr(kubernetes_models, name, None)


def _openapi_models(value: Any, type_name: str, path: str) -> Iterator[str]:
    list_of = re.fullmatch(r"list\[(.+)\]", type_name)
    dict_of = re.fullmatch(r"dict\(str, (.+)\)", type_name) or re.fullmatch(r"dict\[str, (.+)\]", type_name)
    if list_of:
        if not isinstance(value, list):
            yield f"{path}: expected a list"
            return
        for i, item in enumerate(value):
            yield from _openapi_models(item, list_of.group(1), f"{path}[{i}]")
        return
    if dict_of:
        if not isinstance(value, dict):
            yield f"{path}: expected an object"
            return
        for key, item in value.items():
            yield from _openapi_models(item, dict_of.group(1), f"{path}.{key}" if path else key)
        return
    if type_name in _PRIMITIVE or value is None:
        return
    cls = _model_class(type_name)
    if cls is None:
        yield f"{path}: no model {type_name}"
        return
    if not isinstance(value, dict):
        yield f"{path}: expected an object ({type_name})"
        return
    by_key = {cls.attribute_map[attr]: t for attr, t in cls.openapi_types.items()}
    for key, item in value.items():
        here = f"{path}.{key}" if path else key
        if key not in by_key:
            yield f'{here}: unknown field "{key}" ({type_name})'
            continue
        yield from _openapi_models(item, by_key[key], here)


# -- TrainJob: Kubeflow Trainer's pydantic models ----------------------------------------------------------
def _trainer(obj: Obj) -> list[str]:
    import pydantic
    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

    found = list(_pydantic_fields(obj, TrainerV1alpha1TrainJob, ""))
    try:
        TrainerV1alpha1TrainJob.from_dict(obj)
    except pydantic.ValidationError as exc:
        for error in exc.errors():
            found.append(f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}")
    return found


def _unwrap(annotation: Any) -> list[Any]:
    """The types an annotation admits, Optional and unions opened."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [a for arg in typing.get_args(annotation) for a in _unwrap(arg) if a is not type(None)]
    return [annotation]


def _pydantic_value(value: Any, annotation: Any, path: str) -> Iterator[str]:
    import pydantic

    for option in _unwrap(annotation):
        origin = typing.get_origin(option)
        args = typing.get_args(option)
        if origin in (list, typing.List) and isinstance(value, list):  # noqa: UP006
            for i, item in enumerate(value):
                yield from _pydantic_value(item, args[0], f"{path}[{i}]")
            return
        if origin in (dict, typing.Dict) and isinstance(value, dict) and len(args) == 2:  # noqa: UP006
            for key, item in value.items():
                yield from _pydantic_value(item, args[1], f"{path}.{key}")
            return
        if isinstance(option, type) and issubclass(option, pydantic.BaseModel) and isinstance(value, dict):
            yield from _pydantic_fields(value, option, path)
            return


def _pydantic_fields(value: Obj, model: Any, path: str) -> Iterator[str]:
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    for key, item in value.items():
        here = f"{path}.{key}" if path else key
        field = fields.get(key)
        if field is None:
            yield f'{here}: unknown field "{key}" ({model.__name__})'
            continue
        yield from _pydantic_value(item, field.annotation, here)
