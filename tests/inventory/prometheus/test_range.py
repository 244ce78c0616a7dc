"""The report's range client: answers parsed, long ranges split, and every fault named."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
from pathlib import Path

import pytest

from inventory.prometheus.range import MAX_POINTS, PromClient
from placement.cli.main import main
from seats.errors import CannotDecideError
from tests.conftest import FV_ML1_CATALOGUE


def answer(data: object) -> bytes:
    return json.dumps({"status": "success", "data": data}).encode()


def test_range_answers_are_merged_across_pieces() -> None:
    asked: list[dict[str, list[str]]] = []

    def opener(url: str, timeout: float) -> bytes:
        params = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        asked.append(params)
        start = float(params["start"][0])
        return answer(
            {
                "resultType": "matrix",
                "result": [{"metric": {"host": "a"}, "values": [[start, "1"]]}],
            }
        )

    client = PromClient("http://prom:9090", opener=opener)
    ((labels, points),) = client.range("up", 0, 60 * (MAX_POINTS + 5), 60)
    assert labels == {"host": "a"}
    assert len(asked) == 2  # one piece of MAX_POINTS steps, then the rest
    assert [t for t, _ in points] == [0.0, 60.0 * MAX_POINTS]
    assert client.stats.queries == 2


def test_unreachable_prometheus_is_named() -> None:
    def opener(url: str, timeout: float) -> bytes:
        raise urllib.error.URLError("Connection refused")

    with pytest.raises(
        CannotDecideError,
        match=r"http://prom:9090 is unreachable \(Connection refused\) while querying up",
    ):
        PromClient("http://prom:9090", opener=opener).instant("up", 0)


def refusing(error: str, kind: str = "execution") -> object:
    def opener(url: str, timeout: float) -> bytes:
        body = json.dumps({"status": "error", "errorType": kind, "error": error}).encode()
        raise urllib.error.HTTPError(url, 422, "Unprocessable", {}, io.BytesIO(body))  # type: ignore[arg-type]

    return opener


def test_too_many_samples_suggests_a_shorter_window_or_a_larger_step() -> None:
    client = PromClient(
        "http://prom:9090",
        window_text="the window 2026-W37",
        opener=refusing(
            "query processing would load too many samples into memory in query execution"
        ),  # type: ignore[arg-type]
    )
    with pytest.raises(CannotDecideError) as caught:
        client.instant("max_over_time(x[7d])", 0)
    text = str(caught.value)
    assert "--query.max-samples is too low for the window 2026-W37" in text
    assert "--since 2d" in text and "--step 5m" in text


def test_a_query_error_names_the_query() -> None:
    client = PromClient("http://prom:9090", opener=refusing("parse error", "bad_data"))  # type: ignore[arg-type]
    with pytest.raises(CannotDecideError, match=r"query up\{ failed: bad_data: parse error"):
        client.instant("up{", 0)


def test_report_from_an_unreachable_prometheus_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["report", "--prometheus", "http://127.0.0.1:1", "--catalogue", str(FV_ML1_CATALOGUE)]
    )
    assert code == 3
    assert "is unreachable" in capsys.readouterr().err


def test_step_without_prometheus_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["report", "--step", "5m", "--catalogue", str(FV_ML1_CATALOGUE)])
    assert code == 2
    assert "--step goes with --prometheus" in capsys.readouterr().err
