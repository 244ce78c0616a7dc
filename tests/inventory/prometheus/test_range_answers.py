"""Range answers are read by `json`: Prometheus's own layout and any other spacing alike, and a
malformed answer is exit 3 naming the query."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inventory.prometheus.range import PromClient
from seats.errors import CannotDecideError

SERIES = [
    {"metric": {"host": "h1", "gpu": "0"}, "values": [[1788740999.999, "31947454327.466667"]]},
    {
        "metric": {"host": 'odd ]], "values":[[1,"2"]] {x}', "gpu": "ü"},
        "values": [[1788741000, "1e+10"], [1788741060.5, "NaN"], [1788741120, "+Inf"]],
    },
    {"metric": {}, "values": [[1, "-3"], [2, "0"]]},
]


def answer(result: Any, **extra: Any) -> bytes:
    body = {"status": "success", "data": {"resultType": "matrix", "result": result}, **extra}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def client(*bodies: bytes, base: str = "http://prometheus:9090") -> PromClient:
    answers = iter(bodies)
    return PromClient(base, opener=lambda _url, _timeout: next(answers))


def test_every_layout_reads_alike() -> None:
    pretty = json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": SERIES}}, indent=2
    ).encode()
    warned = answer(SERIES, warnings=["partial"])
    reader = client(answer(SERIES), pretty, warned)
    compact, spaced, warning = (reader.range("up", 0, 60, 60) for _ in range(3))
    assert compact == spaced == warning
    assert compact[0] == ({"host": "h1", "gpu": "0"}, [(1788740999.999, 31947454327.466667)])
    # NaN is no reading (left out); +Inf is kept as Prometheus said it.
    assert compact[1][1] == [(1788741000.0, 1e10), (1788741120.0, float("inf"))]
    assert compact[1][0]["host"] == 'odd ]], "values":[[1,"2"]] {x}'
    assert reader.stats.queries == 3 and reader.stats.points == 9


def test_an_empty_answer_has_no_series() -> None:
    assert client(answer([])).range("up", 0, 60, 60) == []


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (answer(SERIES)[:-1], "is not JSON"),  # cut short
        (b"\xff\xfe", "is not JSON"),
        (b'{"status":"error","errorType":"bad_data","error":"parse error"}', "parse error"),
        (answer({"not": "a list"}), "did not return a range matrix"),
        (answer([{"values": [[1, "2"]]}]), "malformed series"),  # no labels
        (answer([{"metric": {}, "values": "1,2"}]), "malformed series"),
        (answer([{"metric": {}, "values": [[1, "2", 3]]}]), "malformed series"),
        (answer([{"metric": {}, "values": [[1, "two"]]}]), "malformed series"),
        (answer([{"metric": {}, "values": [[1, ["2"]]]}]), "malformed series"),
    ],
)
def test_a_malformed_answer_cannot_decide_and_names_the_query(body: bytes, said: str) -> None:
    base = "http://reader:s3cret@prometheus:9090/?token=t0ken"
    with pytest.raises(CannotDecideError, match=said) as caught:
        client(body, base=base).range("gpuplan_card_free_bytes", 0, 60, 60)
    assert "gpuplan_card_free_bytes" in str(caught.value)
    assert caught.value.exit_code == 3
    # The message names the server as public_url shows it: no credentials, no query string.
    assert "Prometheus at http://prometheus:9090/:" in str(caught.value)
    assert "s3cret" not in str(caught.value) and "t0ken" not in str(caught.value)
