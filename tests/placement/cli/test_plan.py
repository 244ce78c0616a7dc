"""`gpuplan plan` end to end on fv-ml1: exit codes, JSON shape, golden text, the ledger record."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from inventory.ledger.store import open_ledger
from inventory.snapshot import load_snapshot
from placement.cli.main import main
from placement.cli.plan_text import render_plan
from placement.plan.planner import plan
from placement.plan.problem import load_add_file
from seats.errors import CatalogueError
from seats.loader import load_catalogue
from seats.units import MiB
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT, ROOT

GOLDEN = Path(__file__).parent.parent / "golden"
EXAMPLES = ROOT / "examples"
BASE = ["plan", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(FV_ML1_SNAPSHOT)]


def run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main([*BASE, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_example_places_flash_next_on_card_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == 0
    assert "PLACED   flash-next → fv-ml1 card 3   --gpu-memory-utilization 0.968" in out


def test_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--add", str(EXAMPLES / "new-4gib.yaml"), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == 1
    assert data["verdict"] == "pass"
    assert data["optimal"] is True
    seats = {s["seat"]: s for s in data["seats"]}
    assert seats["new-4gib"]["cards"] == [1]
    assert seats["flash-next"]["cards"] == [3]
    assert seats["flash-next"]["flags"] == ["--gpu-memory-utilization", "0.968"]
    card1 = next(c for c in data["cards"] if c["index"] == 1)
    assert card1["free_before_bytes"] - card1["free_after_bytes"] == 4 * 1024**3
    assert isinstance(card1["free_before_bytes"], int)
    assert data["moves"] == []


def test_refusal_exits_1_with_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--add", str(EXAMPLES / "new-6gib.yaml"), "--json")
    assert code == 1
    data = json.loads(out)
    assert data["verdict"] == "refuse"
    six = next(s for s in data["seats"] if s["seat"] == "new-6gib")
    assert six["verdict"] == "refuse"
    card1 = next(r for r in six["reasons"] if r["card"] == 1)
    assert (card1["rule"], card1["room_bytes"], card1["short_bytes"]) == (
        "room",
        5_448 * MiB,
        696 * MiB,
    )
    card3 = {r["rule"]: r for r in six["reasons"] if r["card"] == 3}
    # What is left of flash-next-hold is flash-next's now: named beside room, not as a blocker alone.
    assert set(card3) == {"room", "reserve", "exclusive"}
    assert (
        card3["room"]["room_bytes"] == -360_743_699
    )  # JSON keeps the signed figure (344.03 MiB over)


def test_highs_keeps_stdout_json(capfd: pytest.CaptureFixture[str]) -> None:
    code = main([*BASE, "--solver", "highs", "--json"])
    out, _ = capfd.readouterr()
    assert code == 0
    assert json.loads(out)["solver"] == "highs"  # no HiGHS banner before the JSON


def test_vllm_5gib_warns(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--add", str(EXAMPLES / "new-5gib-vllm.yaml"))
    assert code == 0
    assert "new-5gib-vllm → fv-ml1 card 1   --gpu-memory-utilization 0.046" in out
    assert "no longer covers the whole seat" in out


@pytest.mark.parametrize(
    ("name", "add"),
    [
        ("plan_fv_ml1.txt", None),
        ("plan_new_4gib.txt", "examples/new-4gib.yaml"),
        ("plan_new_6gib.txt", "examples/new-6gib.yaml"),
        ("plan_new_5gib_vllm.txt", "examples/new-5gib-vllm.yaml"),
        ("plan_gate_refused.txt", "tests/placement/data/gate-refused.yaml"),
    ],
)
def test_golden(name: str, add: str | None) -> None:
    catalogue = load_catalogue(FV_ML1_CATALOGUE)
    adds = [(add, seat) for seat in load_add_file(ROOT / add)] if add else []
    result = plan(catalogue, [load_snapshot(FV_ML1_SNAPSHOT)], adds)
    text = render_plan(result, {"fv-ml1": "seats/catalogue/fv-ml1.snapshot.json"})
    golden = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_no_catalogue_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    code = main(["plan", "--snapshot", str(FV_ML1_SNAPSHOT)])
    assert code == 2
    assert "no catalogue" in capsys.readouterr().err


def test_bad_add_file_exits_2_naming_file_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nresident: 6 GB\n")
    code, _, err = run(capsys, "--add", str(bad))
    assert code == 2
    assert str(bad) in err and "resident" in err and "GiB" in err


def test_add_list_and_unknown_key(tmp_path: Path) -> None:
    listed = tmp_path / "two.yaml"
    listed.write_text("- {name: a, resident: 1 GiB}\n- {name: b, resident: 2 GiB}\n")
    assert [s.name for s in load_add_file(listed)] == ["a", "b"]
    typo = tmp_path / "typo.yaml"
    typo.write_text("- {name: a, resident: 1 GiB}\n- {name: b, resdent: 2 GiB}\n")
    with pytest.raises(CatalogueError, match=r"typo\.yaml: \[1\]\.resdent: unknown key"):
        load_add_file(typo)


def test_add_name_clash_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    clash = tmp_path / "clash.yaml"
    clash.write_text("name: embed\nresident: 1 GiB\n")
    code, _, err = run(capsys, "--add", str(clash))
    assert code == 2
    assert "already used" in err


def test_zero_time_limit_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys, "--time-limit", "0")
    assert code == 2


def test_missing_ledger_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(
        ["plan", "--catalogue", str(FV_ML1_CATALOGUE), "--ledger", str(tmp_path / "none.sqlite")]
    )
    assert code == 3
    assert "error:" in capsys.readouterr().err


def test_stale_snapshot_with_max_age_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--max-age", "15m")
    assert code == 3
    assert "older than --max-age" in err


def test_ledger_records_each_verdict(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    with open_ledger(db) as ledger:
        ledger.append(load_snapshot(FV_ML1_SNAPSHOT))
    code = main(
        [
            "plan",
            "--catalogue",
            str(FV_ML1_CATALOGUE),
            "--ledger",
            str(db),
            "--max-age",
            "100000d",
            "--add",
            str(EXAMPLES / "new-6gib.yaml"),
        ]
    )
    assert code == 1
    capsys.readouterr()
    with open_ledger(db, readonly=True) as ledger:
        decisions = ledger.decisions()
    assert {(d["kind"], d["seat"], d["verdict"]) for d in decisions} == {
        ("plan", "flash-next", "pass"),
        ("plan", "new-6gib", "refuse"),
    }
    six = next(d for d in decisions if d["seat"] == "new-6gib")
    assert any(r["rule"] == "room" and r["card"] == 1 for r in six["reasons"])
    flash = next(d for d in decisions if d["seat"] == "flash-next")
    assert flash["cards"] == [3] and flash["snapshot_id"] is not None
    assert len(six["inputs_digest"]) == 64


def test_snapshot_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "fv-ml1.json").write_text(FV_ML1_SNAPSHOT.read_text())
    code = main(
        ["plan", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(tmp_path), "--json"]
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out)["snapshots"][0]["host"] == "fv-ml1"


def test_card_in_error_is_skipped_with_a_reason(tmp_path: Path) -> None:
    data = json.loads(FV_ML1_SNAPSHOT.read_text())
    card = data["cards"][1]
    for key in ("total_bytes", "reserved_bytes", "used_bytes", "free_bytes"):
        card[key] = None
    card["processes"] = []
    card["error"] = "GpuIsLost"
    broken = tmp_path / "lost.json"
    broken.write_text(json.dumps(data))
    catalogue = load_catalogue(FV_ML1_CATALOGUE)
    adds = [("four", seat) for seat in load_add_file(EXAMPLES / "new-4gib.yaml")]
    result = plan(catalogue, [load_snapshot(broken)], adds)
    by_seat = {v.seat: v for v in result.verdicts}
    assert by_seat["flash-next"].passed
    four = by_seat["new-4gib"]
    assert not four.passed
    assert ("error", 1) in {(r.rule, r.card) for r in four.reasons}
    text = render_plan(result)
    assert "error: GpuIsLost" in text


# --- one meaning per word: the figures of a rule, total_bytes --------------------------------


def test_a_gate_refusal_reads_as_in_check(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--add", str(ROOT / "tests/placement/data/gate-refused.yaml"))
    assert code == 1
    gate_lines = [line for line in out.splitlines() if line.split()[2:3] == ["gate"]]
    assert len(gate_lines) == 4  # every card of fv-ml1
    for line in gate_lines:
        assert " gate      requested " in line and "  free " in line and "  short " in line
        assert " need " not in line and " room " not in line
    assert "  card 1   gate      requested 47.48 GiB  free 4.42 GiB  short 43.07 GiB" in out


def test_json_total_bytes_is_nvml_total_and_cuda_total_is_beside_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    snapshot = load_snapshot(FV_ML1_SNAPSHOT)
    code, out, _ = run(capsys, "--json")
    assert code == 0
    cards = {c["index"]: c for c in json.loads(out)["cards"]}
    assert main(["ledger", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(FV_ML1_SNAPSHOT), "--json"]) == 0  # fmt: skip
    ledger_cards = {c["index"]: c for c in json.loads(capsys.readouterr().out)["hosts"][0]["cards"]}
    for card in snapshot.cards:
        assert card.total_bytes is not None and card.reserved_bytes
        row = cards[card.index]
        assert row["total_bytes"] == card.total_bytes == ledger_cards[card.index]["total_bytes"]
        assert row["cuda_total_bytes"] == card.total_bytes - card.reserved_bytes
        assert row["cuda_total_bytes"] == ledger_cards[card.index]["cuda_total_bytes"]
        assert row["total_bytes"] > row["cuda_total_bytes"]


def test_card_in_error_has_no_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(FV_ML1_SNAPSHOT.read_text())
    for key in ("total_bytes", "reserved_bytes", "used_bytes", "free_bytes"):
        data["cards"][1][key] = None
    data["cards"][1]["processes"] = []
    data["cards"][1]["error"] = "GpuIsLost"
    broken = tmp_path / "lost.json"
    broken.write_text(json.dumps(data))
    code = main(["plan", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(broken), "--json"])
    assert code == 0
    card1 = next(c for c in json.loads(capsys.readouterr().out)["cards"] if c["index"] == 1)
    assert (card1["error"], card1["total_bytes"], card1["cuda_total_bytes"]) == (
        "GpuIsLost",
        None,
        None,
    )


def _with_hosts(folder: Path, *hosts: str) -> Path:
    """fv-ml1's catalogue with more hosts of its shape (four cards, its figures)."""
    import yaml

    data = yaml.safe_load(FV_ML1_CATALOGUE.read_text())
    for host in hosts:
        data["hosts"][host] = dict(data["hosts"]["fv-ml1"])
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _snapshot_as(folder: Path, host: str) -> Path:
    data = json.loads(FV_ML1_SNAPSHOT.read_text())
    data["host"] = host
    path = folder / f"{host}.json"
    path.write_text(json.dumps(data))
    return path


def test_each_snapshot_file_names_its_host_in_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = _snapshot_as(tmp_path, "fv-ml2")
    catalogue = _with_hosts(tmp_path, "fv-ml2")
    code = main(
        ["plan", "--catalogue", str(catalogue), "--snapshot", str(FV_ML1_SNAPSHOT), "--snapshot", str(other)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert f"fv-ml1 · snapshot 2026-09-16T14:02:11Z ({FV_ML1_SNAPSHOT}) · HiGHS" in out
    assert f"fv-ml2 · snapshot 2026-09-16T14:02:11Z ({other}) · HiGHS" in out


def test_a_host_without_cuda_context_is_warned_once_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = FV_ML1_CATALOGUE.read_text()
    catalogue = tmp_path / "no-context.yaml"
    catalogue.write_text(
        "\n".join(line for line in text.splitlines() if "cuda_context:" not in line) + "\n"
    )
    code = main(
        [
            "plan",
            "--catalogue",
            str(catalogue),
            "--snapshot",
            str(FV_ML1_SNAPSHOT),
            "--add",
            str(EXAMPLES / "new-5gib-vllm.yaml"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0
    said = [line for line in (out + err).splitlines() if "cuda_context" in line]
    assert len(said) == 1
    assert said[0].startswith("warning: host fv-ml1 declares no cuda_context")
    assert "new-5gib-vllm" in said[0]  # an added seat is named with the catalogue's
    assert "hosts: fv-ml1: cuda_context: 1.25 GiB" in said[0]
    assert "gpuplan calibrate" in said[0]
    for unknown in ("{host}", "DESIGN.md", "FACTS" + ".md"):
        assert unknown not in said[0]


def test_seat_names_with_other_characters_are_quoted_in_the_seats_column() -> None:
    from placement.cli.plan_text import card_table
    from placement.plan.cards import PlanCardRow

    row = PlanCardRow(
        host="fv-ml1",
        index=0,
        error=None,
        total_bytes=16 * 1024**3,
        used_bytes=0,
        free_before_bytes=16 * 1024**3,
        free_after_bytes=8 * 1024**3,
        held_bytes=0,
        held=(),
        plannable_before_bytes=16 * 1024**3,
        plannable_after_bytes=8 * 1024**3,
        seats=("vllm-voices", "pid 4121", "my seat"),
        new_seats=("new seat 2", "new_3.b"),
        cuda_total_bytes=16 * 1024**3,
    )
    line = card_table([row]).splitlines()[-1]
    assert line.endswith('vllm-voices pid 4121 "my seat" +"new seat 2" +new_3.b')


# DESIGN.md "Fleets": only the catalogue's hosts; a seat that depends on an unusable one is unknown.


def test_a_host_outside_the_catalogue_is_ignored_and_takes_no_seat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # fv-ml9 is the same machine's figures under a name the catalogue does not describe: its
    # card 3 is free, but no seat may go there (no reserves, margin or cuda_context apply to it).
    other = _snapshot_as(tmp_path, "fv-ml9")
    code, out, err = run(capsys, "--snapshot", str(other), "--json")
    assert code == 0
    result = json.loads(out)
    assert result["ignored_hosts"] == ["fv-ml9"] and result["unusable_hosts"] == []
    assert {card["host"] for card in result["cards"]} == {"fv-ml1"}
    assert [(s["seat"], s["host"]) for s in result["seats"]] == [("flash-next", "fv-ml1")]
    assert "warning: fv-ml9 is not in the catalogue: its cards are ignored" in err
    code, out, _ = run(capsys, "--snapshot", str(other))
    assert out.startswith("ignored (not in the catalogue): fv-ml9\n\nfv-ml1 · snapshot")


def test_a_seat_pinned_to_an_absent_host_is_unknown_and_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue = _with_hosts(tmp_path, "fv-ml2")
    seat = tmp_path / "probe.yaml"
    seat.write_text("name: probe\nhost: fv-ml2\nresident: 1 GiB\n")
    argv = ["plan", "--catalogue", str(catalogue), "--snapshot", str(FV_ML1_SNAPSHOT)]
    code = main([*argv, "--add", str(seat), "--json"])
    out, err = capsys.readouterr()
    assert code == 3
    result = json.loads(out)
    assert result["verdict"] == "unknown"
    assert result["unusable_hosts"] == [
        {"host": "fv-ml2", "kind": "absent", "reason": "absent: no --snapshot of it was given"}
    ]
    verdicts = {s["seat"]: s for s in result["seats"]}
    assert verdicts["flash-next"]["verdict"] == "pass"  # fv-ml1's seats are still placed
    probe = verdicts["probe"]
    assert (probe["verdict"], probe["host"]) == ("unknown", "fv-ml2")
    assert probe["reasons"][0]["text"] == (
        "probe names host fv-ml2, which is unusable: absent: no --snapshot of it was given"
    )
    assert (
        "warning: fv-ml2: absent: no --snapshot of it was given; nothing is planned on fv-ml2"
        in err
    )
    code = main([*argv, "--add", str(seat)])
    out = capsys.readouterr().out
    assert code == 3
    assert out.startswith("unusable host fv-ml2 (absent): absent: no --snapshot of it was given\n")
    assert "UNKNOWN  probe: cannot be judged\n  probe names host fv-ml2, which is unusable" in out


def test_an_unknown_outranks_a_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalogue = _with_hosts(tmp_path, "fv-ml2")
    seats = tmp_path / "seats.yaml"
    seats.write_text(
        "- {name: probe, host: fv-ml2, resident: 1 GiB}\n"
        "- {name: huge, host: fv-ml1, resident: 500 GiB}\n"
    )
    argv = ["plan", "--catalogue", str(catalogue), "--snapshot", str(FV_ML1_SNAPSHOT)]
    code = main([*argv, "--add", str(seats), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 3
    assert {s["seat"]: s["verdict"] for s in result["seats"]} == {
        "flash-next": "pass",
        "probe": "unknown",
        "huge": "refuse",
    }


def test_with_no_usable_host_plan_prints_every_seat_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The catalogue's only host: its ledger snapshot is older than --max-age.
    db = tmp_path / "ledger.sqlite"
    assert main(["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--ledger", str(db)]) == 0
    capsys.readouterr()
    code = main(["plan", "--catalogue", str(FV_ML1_CATALOGUE), "--ledger", str(db), "--json"])
    out, err = capsys.readouterr()
    assert code == 3
    result = json.loads(out)
    assert result["verdict"] == "unknown" and result["cards"] == []
    assert [(s["seat"], s["verdict"]) for s in result["seats"]] == [("flash-next", "unknown")]
    (unusable,) = result["unusable_hosts"]
    assert (unusable["host"], unusable["kind"]) == ("fv-ml1", "stale")
    assert "older than --max-age 15 min" in unusable["reason"]
    assert "nothing is planned on fv-ml1" in err
    code = main(["plan", "--catalogue", str(FV_ML1_CATALOGUE), "--ledger", str(db)])
    out = capsys.readouterr().out
    assert code == 3
    assert out.startswith("unusable host fv-ml1 (stale): stale: snapshot of fv-ml1 from ledger")
    assert "UNKNOWN  flash-next: cannot be judged" in out
