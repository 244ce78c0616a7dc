"""The snapshot model: DESIGN.md's JSON round-trips, and a bad file names the field it breaks."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inventory.snapshot import (
    Card,
    Snapshot,
    SnapshotError,
    dumps_snapshot,
    format_utc,
    load_snapshot,
    loads_snapshot,
    parse_snapshot,
    save_snapshot,
)
from seats.errors import Exit
from tests.conftest import FV_ML1_SNAPSHOT


def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FV_ML1_SNAPSHOT.read_text(encoding="utf-8"))
    return data


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_save_then_load_round_trips(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    path = tmp_path / "out.json"
    save_snapshot(fv_ml1_snapshot, path)
    again = load_snapshot(path)
    assert again == fv_ml1_snapshot
    assert not (tmp_path / "out.json.tmp").exists()  # written atomically, nothing left behind
    assert json.loads(path.read_text())["taken_at"] == "2026-09-16T14:02:11Z"


def test_the_json_shape_is_designs(fv_ml1_snapshot: Snapshot) -> None:
    data = json.loads(dumps_snapshot(fv_ml1_snapshot))
    assert data["schema"] == 1
    assert data["host"] == "fv-ml1"
    card = data["cards"][0]
    for key in (
        "index",
        "uuid",
        "name",
        "total_bytes",
        "reserved_bytes",
        "used_bytes",
        "free_bytes",
    ):
        assert key in card
    assert isinstance(card["total_bytes"], int)
    assert card["processes"][0].keys() >= {"pid", "used_bytes", "cmdline", "seat"}


def test_the_example_reads_as_the_seed_gives_it(fv_ml1_snapshot: Snapshot) -> None:
    assert fv_ml1_snapshot.taken_at == datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
    assert [card.index for card in fv_ml1_snapshot.cards] == [0, 1, 2, 3]
    assert fv_ml1_snapshot.card(0).processes[3].pid == 4121


def test_an_error_card_has_null_figures(tmp_path: Path) -> None:
    data = _data()
    data["cards"][2] = {
        "index": 2,
        "uuid": None,
        "error": "GpuIsLost",
        "total_bytes": None,
        "reserved_bytes": None,
        "used_bytes": None,
        "free_bytes": None,
    }
    snapshot = load_snapshot(_write(tmp_path, data))
    card = snapshot.card(2)
    assert not card.ok
    assert (card.total_bytes, card.used_bytes, card.free_bytes, card.cuda_total_bytes) == (
        None,
        None,
        None,
        None,
    )


def test_an_error_card_with_zeros_is_refused(tmp_path: Path) -> None:
    data = _data()
    data["cards"][2] = {"index": 2, "error": "GpuIsLost", "total_bytes": 0, "free_bytes": 0}
    with pytest.raises(
        SnapshotError, match=r"card in error \(GpuIsLost\) must have null figures"
    ) as caught:
        load_snapshot(_write(tmp_path, data))
    assert caught.value.loc == "cards[2]"


def test_unknown_keys_are_ignored(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    data = _data()
    data["written_by"] = "gpuplan 9.9"
    data["cards"][0]["temperature_c"] = 61
    data["cards"][0]["processes"][0]["container"] = "cyberprev-1"
    assert load_snapshot(_write(tmp_path, data)) == fv_ml1_snapshot


def test_v1_card_has_no_reserve_and_cuda_total_is_nvml_total(tmp_path: Path) -> None:
    data = _data()
    data["cards"][3]["reserved_bytes"] = None
    card = load_snapshot(_write(tmp_path, data)).card(3)
    assert card.cuda_total_bytes == card.total_bytes == 102_625_181_696


def _broken(mutate: Any) -> dict[str, Any]:
    data = copy.deepcopy(_data())
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("mutate", "loc", "message"),
    [
        (lambda d: d["cards"][1].pop("free_bytes"), "cards[1]", r"card 1 lacks free_bytes"),
        (
            lambda d: d["cards"][1].update(total_bytes=None, used_bytes=None),
            "cards[1]",
            r"lacks total_bytes, used_bytes",
        ),
        (
            lambda d: d["cards"][0].update(used_bytes=-5),
            "cards[0].used_bytes",
            r"-\d+ is negative",
        ),
        (
            lambda d: d["cards"][0]["processes"][1].update(used_bytes=-1),
            "cards[0].processes[1].used_bytes",
            r"-\d+ is negative",
        ),
        (
            lambda d: d["cards"][0].update(free_bytes=1961885696.5),
            "cards[0].free_bytes",
            r"expected an integer .*1961885696\.5",
        ),
        (
            lambda d: d["cards"][0].update(total_bytes=1.0e11),
            "cards[0].total_bytes",
            r"expected an integer",
        ),
        (
            lambda d: d["cards"][0].update(total_bytes="95 GiB"),
            "cards[0].total_bytes",
            r"expected an integer",
        ),
        (
            lambda d: d["cards"][0].update(total_bytes=True),
            "cards[0].total_bytes",
            r"expected an integer",
        ),
        (
            lambda d: d["cards"][3].update(index=0),
            "cards",
            r"card index 0 appears twice \(cards\[0\] and cards\[3\]\)",
        ),
        (lambda d: d.update(taken_at="2026-09-16T14:02:11"), "taken_at", r"has no timezone"),
        (
            lambda d: d.update(taken_at="2026-09-16T16:02:11+02:00"),
            "taken_at",
            r"is not UTC \(offset \+0200\)",
        ),
        (
            lambda d: d.update(taken_at="yesterday"),
            "taken_at",
            r"cannot read 'yesterday' as a time",
        ),
        (lambda d: d.update(taken_at=1789567331), "taken_at", r"expected a timestamp string"),
        (lambda d: d.pop("taken_at"), "taken_at", r"required key is missing"),
        (lambda d: d.pop("host"), "host", r"required key is missing"),
        (lambda d: d.update(schema=2), "schema", r"snapshot schema 2 is not supported"),
    ],
)
def test_bad_snapshot_names_the_field(tmp_path: Path, mutate: Any, loc: str, message: str) -> None:
    path = _write(tmp_path, _broken(mutate))
    with pytest.raises(SnapshotError, match=message) as caught:
        load_snapshot(path)
    assert caught.value.loc == loc
    assert str(caught.value).startswith(f"{path}: {loc}: ")
    assert caught.value.exit_code == Exit.BAD_INPUT


def test_zero_offset_is_utc(tmp_path: Path) -> None:
    snapshot = load_snapshot(
        _write(tmp_path, _broken(lambda d: d.update(taken_at="2026-09-16T14:02:11+00:00")))
    )
    assert format_utc(snapshot.taken_at) == "2026-09-16T14:02:11Z"


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text('{"host": "fv-ml1",\n  cards: [}', encoding="utf-8")
    with pytest.raises(SnapshotError, match=r"not valid JSON: .* \(line 2\)") as caught:
        load_snapshot(path)
    assert caught.value.source == str(path)


def test_json_that_is_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="a snapshot is a JSON object"):
        load_snapshot(_write(tmp_path, [1, 2]))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no such file"):
        load_snapshot(tmp_path / "nope.json")


def test_loads_names_its_source() -> None:
    with pytest.raises(SnapshotError, match=r"^<stdin>: "):
        loads_snapshot("nope", "<stdin>")


def test_a_card_is_frozen(fv_ml1_snapshot: Snapshot) -> None:
    card: Card = fv_ml1_snapshot.card(0)
    with pytest.raises(ValueError, match="frozen"):
        card.free_bytes = 0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000, "JSON nested too deeply"),
        ('{"host": "x", "n": ' + "9" * 5000 + "}", "not a snapshot: Exceeds the limit"),
        ('{"host": "x", "taken_at": "2026-09-16T14:02:11Z", "cards": [{"index": 0, '
         '"total_bytes": NaN, "used_bytes": 0, "free_bytes": 0}]}', "expected an integer"),
    ],
)  # fmt: skip
def test_hostile_json_is_a_snapshot_error(text: str, message: str) -> None:
    with pytest.raises(SnapshotError, match=message):
        loads_snapshot(text, "hostile.json")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "schema",
                    "host",
                    "taken_at",
                    "cards",
                    "index",
                    "total_bytes",
                    "reserved_bytes",
                    "used_bytes",
                    "free_bytes",
                    "processes",
                    "pid",
                    "cmdline",
                    "seat",
                    "error",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=14,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(_JSON)
def test_any_json_data_is_a_snapshot_or_a_snapshot_error(data: object) -> None:
    try:
        parse_snapshot(data, "fuzz.json")
    except SnapshotError as exc:
        assert str(exc).startswith("fuzz.json")


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.text(max_size=120))
def test_any_text_is_a_snapshot_or_a_snapshot_error(text: str) -> None:
    try:
        loads_snapshot(text, "fuzz.json")
    except SnapshotError as exc:
        assert str(exc).startswith("fuzz.json")
