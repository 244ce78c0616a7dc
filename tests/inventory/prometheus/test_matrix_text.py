"""Range answers read from Prometheus's own layout agree with `json`, and any other layout is
left to `json`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inventory.prometheus.range import PromClient, _matrix_text

SERIES = [
    {"metric": {"host": "h1", "gpu": "0"}, "values": [[1788740999.999, "31947454327.466667"]]},
    {
        "metric": {"host": 'odd ]], "values":[[1,"2"]] {x}', "gpu": "ü"},
        "values": [[1788741000, "1e+10"], [1788741060.5, "NaN"], [1788741120, "+Inf"]],
    },
    {"metric": {}, "values": [[1, "-3"], [2, "0"]]},
]


def answer(result: list[dict[str, Any]], **extra: Any) -> bytes:
    body = {"status": "success", "data": {"resultType": "matrix", "result": result}, **extra}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def as_json(body: bytes) -> list[tuple[dict[str, str], list[tuple[float, str]]]]:
    series = json.loads(body)["data"]["result"]
    return [(s["metric"], [(float(t), v) for t, v in s["values"]]) for s in series]


def test_prometheus_layout_reads_as_json_does() -> None:
    body = answer(SERIES)
    found = _matrix_text(body)
    assert found is not None
    assert [(labels, [(float(t), v) for t, v in points]) for labels, points in found] == as_json(
        body
    )


def test_an_empty_answer_has_no_series() -> None:
    assert _matrix_text(answer([])) == []


@pytest.mark.parametrize(
    "body",
    [
        answer(SERIES, warnings=["partial"]),
        json.dumps(
            {"status": "success", "data": {"resultType": "matrix", "result": SERIES}}
        ).encode(),  # spaces
        b'{"status":"error","errorType":"bad_data","error":"parse error"}',
        answer([{"metric": {"host": "h1"}, "values": []}]),
        answer([{"values": [[1, "2"]], "metric": {"host": "h1"}}]),
        answer([{"metric": {"host": "h1"}, "values": [[1, 2]]}]),  # a number, not a string
        answer(SERIES)[:-1],  # cut short
        answer(SERIES) + b"\n",
        b"\xff\xfe",
    ],
)
def test_any_other_layout_is_left_to_json(body: bytes) -> None:
    assert _matrix_text(body) is None


def test_range_reads_both_layouts_alike() -> None:
    pretty = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": SERIES}})
    answers = iter([answer(SERIES), pretty.encode()])
    client = PromClient("http://prometheus:9090", opener=lambda _url, _timeout: next(answers))
    compact = client.range("up", 0, 60, 60)
    spaced = client.range("up", 0, 60, 60)
    assert compact == spaced
    assert compact[1][1] == [(1788741000.0, 1e10), (1788741120.0, float("inf"))]
