"""`gpuplan schema`: valid JSON, extra keys forbidden everywhere, and the example validates.

jsonschema is not a dependency, so `_validate` below checks the subset of JSON Schema the
printed schema uses; a keyword it does not know fails the test rather than passing silently.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from typing import Any

import pytest

from placement.cli.main import main
from seats.loader import read_yaml
from tests.conftest import FV_ML1_CATALOGUE

_KNOWN = {
    "$schema", "$defs", "$ref", "title", "description", "default", "type", "properties",
    "additionalProperties", "required", "anyOf", "const", "enum", "items", "minimum",
    "maximum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "pattern",
}  # fmt: skip
_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def _errors(value: Any, schema: dict[str, Any], root: dict[str, Any], at: str) -> list[str]:
    unknown = set(schema) - _KNOWN
    assert not unknown, f"schema keyword(s) {unknown} at {at} not checked by this test"
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return _errors(value, root["$defs"][name], root, at)
    if "anyOf" in schema:
        branches = [_errors(value, branch, root, at) for branch in schema["anyOf"]]
        return [] if any(not b for b in branches) else [f"{at}: matches no branch: {branches}"]
    out: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        is_bool = isinstance(value, bool)
        if not isinstance(value, _TYPES[kind]) or (is_bool and kind != "boolean"):
            return [f"{at}: {value!r} is not {kind}"]
    if "const" in schema and value != schema["const"]:
        out.append(f"{at}: {value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{at}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        out.append(f"{at}: {value} < {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        out.append(f"{at}: {value} > {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        out.append(f"{at}: {value} <= {schema['exclusiveMinimum']}")
    if "minLength" in schema and len(value) < schema["minLength"]:
        out.append(f"{at}: too short")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        out.append(f"{at}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{at}: too few items")
        for i, item in enumerate(value):
            out += _errors(item, schema.get("items", {}), root, f"{at}[{i}]")
    if isinstance(value, dict):
        if len(value) < schema.get("minProperties", 0):
            out.append(f"{at}: too few keys")
        for key in schema.get("required", []):
            if key not in value:
                out.append(f"{at}.{key}: required")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                out += _errors(item, properties[key], root, f"{at}.{key}")
            elif extra is False:
                out.append(f"{at}.{key}: additional key")
            elif isinstance(extra, dict):
                out += _errors(item, extra, root, f"{at}.{key}")
    return out


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["schema"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def _example() -> dict[str, Any]:
    data = read_yaml(FV_ML1_CATALOGUE.read_text(encoding="utf-8"), str(FV_ML1_CATALOGUE))
    assert isinstance(data, dict)
    return data


def test_schema_is_draft_2020_json(schema: dict[str, Any]) -> None:
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object"
    assert schema["required"] == ["hosts"]
    assert set(schema["properties"]) == {"hosts", "reserves", "seats"}
    assert set(schema["$defs"]) >= {"Host", "Reserve", "Seat", "Engine", "Lora", "Adapter"}


def test_every_object_forbids_extra_keys(schema: dict[str, Any]) -> None:
    assert schema["additionalProperties"] is False
    for name, definition in schema["$defs"].items():
        assert definition["additionalProperties"] is False, name


def test_the_example_catalogue_validates(schema: dict[str, Any]) -> None:
    assert _errors(_example(), schema, schema, "") == []


def test_reserve_for_is_spelled_for(schema: dict[str, Any]) -> None:
    assert "for" in schema["$defs"]["Reserve"]["properties"]
    assert "for_" not in schema["$defs"]["Reserve"]["properties"]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d.update(colour="red"), ".colour: additional key"),
        (lambda d: d["hosts"]["fv-ml1"].update(gpus=4), ".hosts.fv-ml1.gpus: additional key"),
        (lambda d: d["seats"][0].update(port=8021), ".seats[0].port: additional key"),
        (
            lambda d: d["seats"][0]["engine"].update(util=0.4),
            ".seats[0].engine.util: additional key",
        ),
        (lambda d: d["reserves"][0].update(bytes="94 GB"), ".reserves[0].bytes: matches no branch"),
        (
            lambda d: d["seats"][0].update(resident="47.1 GB"),
            ".seats[0].resident: matches no branch",
        ),
        (lambda d: d["seats"][0].update(resident=0), ".seats[0].resident: matches no branch"),
        (lambda d: d["seats"][0].update(gpus=0), ".seats[0].gpus: matches no branch"),
        (lambda d: d["seats"][0].update(state="up"), ".seats[0].state: 'up' not in"),
        (
            lambda d: d["seats"][3]["engine"].update(gpu_memory_utilization=1.5),
            "gpu_memory_utilization: matches no branch",
        ),
        (lambda d: d["seats"][3]["engine"].update(version=0.11), ".version: matches no branch"),
        (lambda d: d.pop("hosts"), ".hosts: required"),
    ],
)
def test_schema_refuses_what_the_loader_refuses(
    schema: dict[str, Any], edit: Any, expected: str
) -> None:
    data = _example()
    edit(data)
    errors = _errors(data, schema, schema, "")
    assert any(expected in error for error in errors), errors


def test_byte_strings_the_loader_reads_are_valid(schema: dict[str, Any]) -> None:
    data = _example()
    data["seats"][0]["resident"] = "93GiB"
    data["seats"][1]["resident"] = 123456
    data["hosts"]["fv-ml1"]["margin"] = "1.5 TiB"
    assert _errors(data, schema, schema, "") == []
