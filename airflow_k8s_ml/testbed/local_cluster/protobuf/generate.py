"""Regenerate ``schema.json``, the field table :mod:`.wire` decodes Kubernetes protobuf with.

Run by hand against checkouts of kubernetes/api and kubernetes/apimachinery (the field numbers never change
between releases, so any current checkout serves every kubectl)::

    python -m airflow_k8s_ml.testbed.local_cluster.protobuf.generate API_DIR APIMACHINERY_DIR

It reads each package's ``generated.proto`` (messages, field numbers, types) and the Go structs' tags
beside it (``types.go`` etc.: whether a field is a pointer and whether its JSON tag says ``omitempty``):
gogo-protobuf writes every non-pointer field, zero or not, so the decoder needs the Go side to drop the
zeros that Go's JSON encoding would omit, and to keep a pointer's zero (``backoffLimit: 0``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

API_PACKAGES = (
    "core/v1",
    "apps/v1",
    "batch/v1",
    "authorization/v1",
    "rbac/v1",
    "policy/v1",
    "networking/v1",
    "autoscaling/v1",
    "autoscaling/v2",
    "discovery/v1",
    "scheduling/v1",
    "coordination/v1",
    "storage/v1",
    "events/v1",
    "node/v1",
    "authentication/v1",
)
MACHINERY_PACKAGES = ("pkg/apis/meta/v1", "pkg/runtime", "pkg/util/intstr", "pkg/api/resource")
_FIELD = re.compile(r"^\s*(optional|repeated)\s+(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
_MAP = re.compile(r"^\s*map<\s*(\S+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")
_STRUCT = re.compile(r"^type (\w+) struct \{")
_TAGGED = re.compile(r'^\s*\w+\s+(\S+)\s+`[^`]*json:"([^"]*)"[^`]*protobuf:"\w+,(\d+),')
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float", "fixed64"}


def _qualify(type_: str, package: str) -> str:
    type_ = type_.lstrip(".")
    return type_ if type_ in SCALARS or "." in type_ else f"{package}.{type_}"


def parse_proto(text: str) -> dict[str, dict[str, list[object]]]:
    package = re.search(r"^package ([\w.]+);", text, re.M)
    assert package is not None
    messages: dict[str, dict[str, list[object]]] = {}
    current: dict[str, list[object]] | None = None
    for line in text.splitlines():
        start = re.match(r"^message (\w+) \{", line)
        if start:
            current = messages.setdefault(f"{package.group(1)}.{start.group(1)}", {})
        elif line.startswith("}"):
            current = None
        elif current is not None and (m := _MAP.match(line)):
            current[m.group(4)] = [m.group(3), _qualify(m.group(2), package.group(1)), "m"]
        elif current is not None and (f := _FIELD.match(line)):
            label = "r" if f.group(1) == "repeated" else "o"
            current[f.group(4)] = [f.group(3), _qualify(f.group(2), package.group(1)), label]
    return messages


def parse_go(directory: Path) -> dict[tuple[str, str], tuple[bool, bool]]:
    """(struct, field number) -> (pointer, omitempty) from the tags of the package's Go files."""
    found: dict[tuple[str, str], tuple[bool, bool]] = {}
    for path in sorted(directory.glob("*.go")):
        if path.name.endswith("_test.go") or path.name.startswith(("zz_", "generated")):
            continue
        struct = None
        for line in path.read_text().splitlines():
            if m := _STRUCT.match(line):
                struct = m.group(1)
            elif line.startswith("}"):
                struct = None
            elif struct and (t := _TAGGED.match(line)):
                found[(struct, t.group(3))] = (t.group(1).startswith("*"), "omitempty" in t.group(2))
    return found


def generate(api: Path, machinery: Path) -> dict[str, dict[str, list[object]]]:
    dirs = [api / p for p in API_PACKAGES] + [machinery / p for p in MACHINERY_PACKAGES]
    table: dict[str, dict[str, list[object]]] = {}
    for directory in dirs:
        messages = parse_proto((directory / "generated.proto").read_text())
        go = parse_go(directory)
        for name, fields in messages.items():
            struct = name.rsplit(".", 1)[1]
            for number, field in fields.items():
                pointer, omitempty = go.get((struct, number), (False, True))
                field.append(int(pointer) | (2 if omitempty else 0))
        table.update(messages)
    return table


def main(argv: list[str]) -> None:
    table = generate(Path(argv[0]), Path(argv[1]))
    out = Path(__file__).with_name("schema.json")
    out.write_text(json.dumps(table, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{out}: {len(table)} messages")


if __name__ == "__main__":
    main(sys.argv[1:])
