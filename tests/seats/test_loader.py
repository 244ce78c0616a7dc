"""The catalogue loader: every rule of DESIGN.md "Rules a loader enforces" and every bad input
of issue 2, each on a real file, each pinned to its file, field path and sentence."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from seats.errors import CatalogueError, Exit
from seats.loader import MAX_DOCUMENT_BYTES, load_catalogue, parse_catalogue, read_yaml
from seats.units import GiB, MiB

BASE = """\
hosts:
  fv-ml1:
    cards: 4
    card_total: 97871 MiB
    cuda_context: 1183 MiB
    margin: 256 MiB
reserves:
  - name: flash-next-hold
    host: fv-ml1
    gpu: 3
    bytes: card
    for: [flash-next]
seats:
  - name: cyberprev
    host: fv-ml1
    gpus: [0]
    resident: 47100 MiB
    state: running
    match: 'vllm.*--port[ =]8021'
  - name: parakeet-stt
    host: fv-ml1
    gpus: [0]
    resident: 638 MiB
    state: running
  - name: vllm-voices
    host: fv-ml1
    gpus: [0]
    resident: 10740 MiB
    state: running
    engine: {kind: vllm, version: "0.11.0", gpu_memory_utilization: 0.11, kv_cache_memory: 2 GiB}
  - name: flash-next
    host: fv-ml1
    gpus: 1
    resident: 93 GiB
    exclusive: true
    engine: {kind: vllm, version: "0.11.0"}
"""


def write(tmp_path: Path, text: str, name: str = "catalogue.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def edited(old: str, new: str) -> str:
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new)


# --- what loads ---------------------------------------------------------------------------


def test_base_loads_with_bytes_as_ints(tmp_path: Path) -> None:
    catalogue = load_catalogue(write(tmp_path, BASE))
    host = catalogue.hosts["fv-ml1"]
    assert host.card_total_bytes == 102_625_181_696
    assert host.cuda_context_bytes == 1183 * MiB
    assert host.margin_bytes == 256 * MiB
    assert catalogue.seat("vllm-voices").resident_bytes == 10_740 * MiB
    assert catalogue.seat("vllm-voices").engine.kv_cache_bytes == 2 * GiB
    assert catalogue.seat("flash-next").resident_bytes == 93 * GiB
    assert catalogue.reserves[0].amount_bytes == "card"
    assert catalogue.reserves[0].for_ == ("flash-next",)


def test_defaults_are_designs(tmp_path: Path) -> None:
    text = "hosts:\n  box: {cards: 2}\nseats:\n  - {name: s, resident: 1 GiB}\n"
    catalogue = load_catalogue(write(tmp_path, text))
    seat = catalogue.seat("s")
    host = catalogue.hosts["box"]
    assert (seat.state, seat.gpus, seat.priority, seat.exclusive) == ("planned", 1, 0, False)
    assert (seat.engine.kind, seat.engine.version, seat.engine.gpu_memory_utilization) == (
        "other",
        None,
        None,
    )
    assert (seat.host, seat.match, seat.lora, seat.weights_bytes) == (None, None, None, None)
    assert (host.margin_bytes, host.cuda_context_bytes, host.card_total_bytes) == (0, 0, None)
    assert catalogue.reserves == ()


def test_the_catalogue_is_frozen(tmp_path: Path) -> None:
    catalogue = load_catalogue(write(tmp_path, BASE))
    with pytest.raises(ValidationError, match="frozen"):
        catalogue.seat("cyberprev").resident_bytes = 1  # type: ignore[misc]


def test_a_reserve_may_be_an_amount(tmp_path: Path) -> None:
    catalogue = load_catalogue(write(tmp_path, edited("bytes: card", "bytes: 60 GiB")))
    assert catalogue.reserves[0].amount_bytes == 60 * GiB


def test_a_catalogue_error_is_bad_input() -> None:
    assert CatalogueError("f.yaml", "seats[0]", "x").exit_code == Exit.BAD_INPUT


# --- bad input: the list --------------------------------------------------------


def test_unknown_key(tmp_path: Path) -> None:
    path = write(
        tmp_path, edited("    margin: 256 MiB\n", "    margin: 256 MiB\n    colour: red\n")
    )
    with pytest.raises(CatalogueError, match=r"hosts\.fv-ml1\.colour: unknown key") as caught:
        load_catalogue(path)
    assert caught.value.path == str(path)
    assert caught.value.loc == "hosts.fv-ml1.colour"
    assert str(caught.value).startswith(f"{path}: ")


def test_unknown_key_in_a_seat(tmp_path: Path) -> None:
    path = write(tmp_path, edited("    resident: 638 MiB\n", "    resident: 638 MiB\n    gpu: 1\n"))
    with pytest.raises(CatalogueError, match="unknown key") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].gpu"


def test_duplicate_seat_name(tmp_path: Path) -> None:
    path = write(tmp_path, edited("  - name: parakeet-stt\n", "  - name: cyberprev\n"))
    with pytest.raises(
        CatalogueError, match=r"name 'cyberprev' is already used by seats\[0\]"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].name"


def test_a_reserve_may_not_share_a_seats_name(tmp_path: Path) -> None:
    path = write(tmp_path, edited("  - name: flash-next-hold\n", "  - name: parakeet-stt\n"))
    with pytest.raises(CatalogueError, match=r"already used by seats\[1\]") as caught:
        load_catalogue(path)
    assert caught.value.loc == "reserves[0].name"


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    path = write(
        tmp_path, edited("    resident: 638 MiB\n", "    resident: 638 MiB\n    resident: 1 GiB\n")
    )
    with pytest.raises(
        CatalogueError, match=r"duplicate key 'resident' at line 24 \(first at line 23\)"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].resident"


def test_duplicate_host(tmp_path: Path) -> None:
    path = write(tmp_path, BASE.replace("reserves:\n", "  fv-ml1: {cards: 2}\nreserves:\n", 1))
    with pytest.raises(CatalogueError, match="duplicate key 'fv-ml1'") as caught:
        load_catalogue(path)
    assert caught.value.loc == "hosts.fv-ml1"


def test_resident_in_decimal_gb_is_refused_with_the_binary_fix(tmp_path: Path) -> None:
    path = write(tmp_path, edited("resident: 10740 MiB", "resident: 47.1 GB"))
    with pytest.raises(CatalogueError, match=r"ambiguous unit 'GB'; write binary units") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2].resident"
    assert "'47.1 GiB'" in caught.value.msg
    assert "'47100 MiB'" in caught.value.msg  # the seed's "GB" were nvidia-smi MiB


def test_resident_as_a_fraction_is_never_a_share(tmp_path: Path) -> None:
    path = write(tmp_path, edited("resident: 10740 MiB", "resident: 0.4"))
    with pytest.raises(
        CatalogueError, match=r"seats\[2\]\.resident: 0\.4 looks like a fraction"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2].resident"


@pytest.mark.parametrize("value", ["-5", "-5 MiB"])
def test_negative_resident(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, edited("resident: 10740 MiB", f"resident: {value}"))
    with pytest.raises(CatalogueError, match=r"is negative; a byte size is 0 or more") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2].resident"


def test_zero_resident(tmp_path: Path) -> None:
    path = write(tmp_path, edited("resident: 10740 MiB", "resident: 0"))
    with pytest.raises(CatalogueError, match="must be more than 0 bytes") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2].resident"


def test_bool_resident(tmp_path: Path) -> None:
    path = write(tmp_path, edited("resident: 10740 MiB", "resident: yes"))
    with pytest.raises(CatalogueError, match="is a bool, not a byte size") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2].resident"


def test_negative_margin(tmp_path: Path) -> None:
    path = write(tmp_path, edited("margin: 256 MiB", "margin: -256 MiB"))
    with pytest.raises(CatalogueError, match="negative") as caught:
        load_catalogue(path)
    assert caught.value.loc == "hosts.fv-ml1.margin"


def test_card_index_the_host_lacks(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        edited("    gpus: [0]\n    resident: 638 MiB", "    gpus: [4]\n    resident: 638 MiB"),
    )
    with pytest.raises(
        CatalogueError, match=r"host 'fv-ml1' has cards 0–3; there is no card 4"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].gpus[0]"


def test_negative_card_index(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        edited("    gpus: [0]\n    resident: 638 MiB", "    gpus: [-1]\n    resident: 638 MiB"),
    )
    with pytest.raises(CatalogueError, match="card index -1 is negative") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].gpus"


def test_reserve_on_a_card_the_host_lacks(tmp_path: Path) -> None:
    path = write(tmp_path, edited("    gpu: 3\n", "    gpu: 4\n"))
    with pytest.raises(CatalogueError, match="there is no card 4") as caught:
        load_catalogue(path)
    assert caught.value.loc == "reserves[0].gpu"


def test_reserve_larger_than_its_card(tmp_path: Path) -> None:
    path = write(tmp_path, edited("bytes: card", "bytes: 200 GiB"))
    with pytest.raises(
        CatalogueError,
        match=r"reserves on fv-ml1:3 add up to 200\.00 GiB \(214748364800 B\), more than the card's 95\.58 GiB",
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "reserves[0].bytes"


def test_reserves_on_one_card_add_up(tmp_path: Path) -> None:
    two = edited("bytes: card", "bytes: 60 GiB").replace(
        "reserves:\n",
        "reserves:\n  - {name: spare, host: fv-ml1, gpu: 3, bytes: 40 GiB, for: [cyberprev]}\n",
    )
    path = write(tmp_path, two)
    with pytest.raises(CatalogueError, match=r"add up to 100\.00 GiB") as caught:
        load_catalogue(path)
    assert caught.value.loc == "reserves[1].bytes"


def test_a_whole_card_reserve_leaves_room_for_no_other(tmp_path: Path) -> None:
    two = BASE.replace(
        "reserves:\n",
        "reserves:\n  - {name: spare, host: fv-ml1, gpu: 3, bytes: 1 GiB, for: [cyberprev]}\n",
    )
    path = write(tmp_path, two)
    with pytest.raises(CatalogueError, match="held whole by 'flash-next-hold'") as caught:
        load_catalogue(path)
    assert caught.value.loc == "reserves[1]"


def test_negative_reserve_says_why_not_which_union_branch(tmp_path: Path) -> None:
    path = write(tmp_path, edited("bytes: card", "bytes: -2 GiB"))
    with pytest.raises(
        CatalogueError, match=r"reserves\[0\]\.bytes: '-2 GiB' is negative"
    ) as caught:
        load_catalogue(path)
    assert "Input should be 'card'" not in caught.value.msg


def test_for_naming_no_seat(tmp_path: Path) -> None:
    path = write(tmp_path, edited("for: [flash-next]", "for: [flash-nxt]"))
    with pytest.raises(
        CatalogueError, match="'flash-nxt' names no seat of this catalogue"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "reserves[0].for[0]"


def test_for_naming_a_seat_of_another_host(tmp_path: Path) -> None:
    text = BASE.replace("hosts:\n", "hosts:\n  fv-ml2: {cards: 2}\n").replace(
        "    host: fv-ml1\n    gpus: 1\n", "    host: fv-ml2\n    gpus: 1\n"
    )
    path = write(tmp_path, text)
    with pytest.raises(CatalogueError, match="seat 'flash-next' is on host 'fv-ml2'") as caught:
        load_catalogue(path)
    assert caught.value.loc == "reserves[0].for[0]"


@pytest.mark.parametrize("util", ["1.5", "0", "-0.1", "40"])
def test_gpu_memory_utilization_outside_zero_one(tmp_path: Path, util: str) -> None:
    path = write(
        tmp_path, edited("gpu_memory_utilization: 0.11", f"gpu_memory_utilization: {util}")
    )
    with pytest.raises(
        CatalogueError, match=r"is outside \(0, 1\]: it is a fraction of the card's total"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2].engine.gpu_memory_utilization"


def test_gpu_memory_utilization_of_one_is_allowed(tmp_path: Path) -> None:
    catalogue = load_catalogue(
        write(tmp_path, edited("gpu_memory_utilization: 0.11", "gpu_memory_utilization: 1"))
    )
    assert catalogue.seat("vllm-voices").engine.gpu_memory_utilization == 1


def test_python_tag_never_executes(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"hosts: !!python/object/apply:os.system ['touch {marker}']\n"
    path = write(tmp_path, text)
    with pytest.raises(
        CatalogueError, match=r"the tag '!!python/object/apply:os\.system' is not allowed"
    ) as caught:
        load_catalogue(path)
    assert not marker.exists()
    assert caught.value.path == str(path)
    assert "never runs code" in caught.value.msg


def test_python_name_tag_inside_a_seat_never_executes(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = edited(
        "resident: 638 MiB", f"resident: !!python/object/apply:os.system ['touch {marker}']"
    )
    with pytest.raises(CatalogueError, match="is not allowed"):
        load_catalogue(write(tmp_path, text))
    assert not marker.exists()


BILLION_LAUGHS = (
    "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(
        f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n"
        for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "hosts: *i\n"
)


def test_billion_laughs_fails_fast_with_the_alias_message(tmp_path: Path) -> None:
    path = write(tmp_path, BILLION_LAUGHS)
    assert path.stat().st_size < 1024  # 10**9 "lol"s once expanded
    with pytest.raises(CatalogueError, match="expands past 1 MiB through YAML aliases") as caught:
        load_catalogue(path)
    assert caught.value.path == str(path)


@pytest.mark.slow
def test_billion_laughs_does_not_eat_memory(tmp_path: Path) -> None:
    # Run the load under a 2 GiB address-space cap: expanding the aliases would need
    # tens of GiB, so a loader that expands first dies with MemoryError here.
    path = write(tmp_path, BILLION_LAUGHS)
    code = (
        "import sys\n"
        "from seats.errors import CatalogueError\n"
        "from seats.loader import load_catalogue\n"
        "try:\n"
        "    load_catalogue(sys.argv[1])\n"
        "except CatalogueError as exc:\n"
        "    print(exc)\n"
    )

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * GiB, 2 * GiB))

    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "expands past 1 MiB through YAML aliases" in done.stdout


def test_a_self_referencing_alias_does_not_hang(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="nests deeper than 64 levels") as caught:
        load_catalogue(write(tmp_path, "hosts: &a [*a]\n"))
    assert caught.value.loc.startswith("hosts[0][0]")


def test_nesting_past_the_depth_cap(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="nests deeper than 64 levels"):
        load_catalogue(write(tmp_path, "hosts: " + "[" * 100 + "]" * 100 + "\n"))


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(
        CatalogueError, match="the file is empty; a catalogue needs at least `hosts:`"
    ) as caught:
        load_catalogue(path)
    assert caught.value.path == str(path)


def test_not_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts: [unclosed\n  : : {\n")
    with pytest.raises(CatalogueError, match=r"not valid YAML: .*\(line 2\)") as caught:
        load_catalogue(path)
    assert caught.value.path == str(path)


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b\n", "list"), ("just words\n", "str")])
def test_yaml_that_is_not_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    with pytest.raises(CatalogueError, match=f"a catalogue is a mapping with `hosts:`, got {kind}"):
        load_catalogue(write(tmp_path, text))


def test_two_documents(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match=r"one YAML document; found a second \(line 2\)"):
        load_catalogue(write(tmp_path, "hosts: {a: {cards: 1}}\n---\nhosts: {}\n"))


def test_deep_nesting_is_refused_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="nests deeper than 64 levels"):
        load_catalogue(write(tmp_path, "hosts: " + "[" * 5_000 + "]" * 5_000 + "\n"))


def test_version_as_a_float(tmp_path: Path) -> None:
    path = write(tmp_path, edited('version: "0.11.0", gpu', "version: 0.11, gpu"))
    with pytest.raises(
        CatalogueError,
        match=r'YAML read the version as the number 0\.11; quote it, e\.g\. "0\.11\.0"',
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2].engine.version"


def test_file_over_one_mib(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "#" * MAX_DOCUMENT_BYTES + "\n")
    with pytest.raises(CatalogueError, match="over 1 MiB"):
        load_catalogue(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(CatalogueError, match="no such file") as caught:
        load_catalogue(path)
    assert caught.value.path == str(path)


def test_control_characters(tmp_path: Path) -> None:
    with pytest.raises(
        CatalogueError, match=r"not YAML text: control character #x001f at offset 7"
    ):
        load_catalogue(write(tmp_path, "hosts: \x1f\n"))


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("hosts: {caf\xe9: {cards: 1}}\n".encode("latin-1"))
    with pytest.raises(CatalogueError, match="not UTF-8 text"):
        load_catalogue(path)


# --- the other rules of DESIGN.md ----------------------------------------------------------


def test_missing_required_key(tmp_path: Path) -> None:
    path = write(tmp_path, edited("    resident: 638 MiB\n", ""))
    with pytest.raises(CatalogueError, match="required key is missing") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].resident"


def test_no_hosts(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="required key is missing") as caught:
        load_catalogue(write(tmp_path, "seats: []\n"))
    assert caught.value.loc == "hosts"


def test_seat_on_an_unknown_host(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        edited(
            "  - name: parakeet-stt\n    host: fv-ml1\n",
            "  - name: parakeet-stt\n    host: fv-ml2\n",
        ),
    )
    with pytest.raises(
        CatalogueError, match=r"host 'fv-ml2' is not among hosts \(fv-ml1\)"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].host"


def test_running_seat_needs_a_card_list(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        edited("    gpus: [0]\n    resident: 638 MiB", "    gpus: 1\n    resident: 638 MiB"),
    )
    with pytest.raises(
        CatalogueError, match=r"running seat 'parakeet-stt' needs a card list, e.g. gpus: \[0\]"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].gpus"


def test_running_seat_needs_a_host(tmp_path: Path) -> None:
    path = write(
        tmp_path, edited("  - name: parakeet-stt\n    host: fv-ml1\n", "  - name: parakeet-stt\n")
    )
    with pytest.raises(CatalogueError, match="seat 'parakeet-stt'") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].host"


def test_a_planned_pin_names_its_host(tmp_path: Path) -> None:
    path = write(tmp_path, edited("    host: fv-ml1\n    gpus: 1\n", "    gpus: [1]\n"))
    with pytest.raises(
        CatalogueError, match=r"seat 'flash-next' pins cards \[1\] but names no host"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[3].host"


def test_an_int_gpus_is_at_most_the_hosts_cards(tmp_path: Path) -> None:
    path = write(
        tmp_path, edited("    host: fv-ml1\n    gpus: 1\n", "    host: fv-ml1\n    gpus: 5\n")
    )
    with pytest.raises(
        CatalogueError, match="seat 'flash-next' needs 5 cards; host 'fv-ml1' has 4"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[3].gpus"


def test_an_unhosted_seat_needs_some_host_with_enough_cards(tmp_path: Path) -> None:
    path = write(tmp_path, edited("    host: fv-ml1\n    gpus: 1\n", "    gpus: 8\n"))
    with pytest.raises(CatalogueError, match="needs 8 cards; no host has that many") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[3].gpus"


def test_a_card_listed_twice(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        edited("    gpus: [0]\n    resident: 638 MiB", "    gpus: [0, 0]\n    resident: 638 MiB"),
    )
    with pytest.raises(CatalogueError, match="names a card twice") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].gpus"


def test_gpus_as_a_string(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        edited("    gpus: [0]\n    resident: 638 MiB", "    gpus: '0'\n    resident: 638 MiB"),
    )
    with pytest.raises(
        CatalogueError, match="gpus must be a card list like \\[0\\] or a count like 1, got '0'"
    ):
        load_catalogue(path)


def test_a_bad_match_regex(tmp_path: Path) -> None:
    path = write(tmp_path, edited("match: 'vllm.*--port[ =]8021'", "match: 'vllm(--port'"))
    with pytest.raises(CatalogueError, match="is not a valid regex") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[0].match"


def test_unknown_state(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        edited("    resident: 638 MiB\n    state: running", "    resident: 638 MiB\n    state: up"),
    )
    with pytest.raises(CatalogueError, match="'running', 'planned' or 'retired'") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[1].state"


def test_utilization_as_a_string(tmp_path: Path) -> None:
    path = write(tmp_path, edited("gpu_memory_utilization: 0.11", "gpu_memory_utilization: '0.11'"))
    with pytest.raises(CatalogueError, match=r"must be a number in \(0, 1\], got '0\.11'"):
        load_catalogue(path)


def test_weights_larger_than_resident(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        edited("    resident: 10740 MiB\n", "    resident: 10740 MiB\n    weights: 20 GiB\n"),
    )
    with pytest.raises(CatalogueError, match=r"weights \(\d+ B\) are more than resident") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2]"


def test_adapter_names_are_unique(tmp_path: Path) -> None:
    lora = "    lora: {adapters: [{name: lv-yarros}, {name: lv-yarros, persisted: false}]}\n"
    path = write(tmp_path, edited("    resident: 10740 MiB\n", "    resident: 10740 MiB\n" + lora))
    with pytest.raises(CatalogueError, match="adapter name 'lv-yarros' appears twice") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2].lora.adapters"


def test_read_yaml_and_parse_catalogue_are_separate_steps(tmp_path: Path) -> None:
    data = read_yaml(BASE, "inline")
    assert isinstance(data, dict)
    assert data["seats"][0]["resident"] == "47100 MiB"  # still text: units are the model's job
    catalogue = parse_catalogue(data, "inline")
    assert catalogue.seat("cyberprev").resident_bytes == 47_100 * MiB


def test_yaml_merge_keys_work_and_explicit_keys_override(tmp_path: Path) -> None:
    # `<<: *base` is common in compose-style YAML; overriding a merged key is not a duplicate.
    text = (
        "hosts:\n  fv-ml1: {cards: 4}\nseats:\n"
        "  - &base {name: a, host: fv-ml1, gpus: [0], resident: 1 GiB, state: running}\n"
        "  - <<: *base\n    name: b\n    gpus: [1]\n"
    )
    catalogue = load_catalogue(write(tmp_path, text))
    assert [(s.name, s.gpus, s.resident_bytes) for s in catalogue.seats] == [
        ("a", (0,), GiB),
        ("b", (1,), GiB),
    ]


def test_a_key_repeated_beside_a_merge_is_still_a_duplicate(tmp_path: Path) -> None:
    text = (
        "hosts:\n  fv-ml1: {cards: 4}\nseats:\n"
        "  - &base {name: a, host: fv-ml1, gpus: [0], resident: 1 GiB, state: running}\n"
        "  - <<: *base\n    name: b\n    name: c\n"
    )
    with pytest.raises(
        CatalogueError, match=r"duplicate key 'name' at line 7 \(first at line 6\)"
    ) as caught:
        load_catalogue(write(tmp_path, text))
    assert caught.value.loc == "seats[1].name"


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["card", "10740 MiB", "47.1 GB", "0.4", "running", "vllm", "fv-ml1"])
)
_TREES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "hosts",
                    "seats",
                    "reserves",
                    "fv-ml1",
                    "cards",
                    "name",
                    "host",
                    "gpus",
                    "gpu",
                    "resident",
                    "bytes",
                    "for",
                    "state",
                    "engine",
                    "lora",
                    "match",
                    "margin",
                    "x",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(_TREES)
def test_any_data_is_a_catalogue_or_a_catalogue_error(data: object) -> None:
    try:
        parse_catalogue(data, "fuzz.yaml")
    except CatalogueError as exc:
        assert str(exc).startswith("fuzz.yaml")


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_a_catalogue_or_a_catalogue_error(text: str) -> None:
    try:
        parse_catalogue(read_yaml(text, "fuzz.yaml"), "fuzz.yaml")
    except CatalogueError as exc:
        assert str(exc).startswith("fuzz.yaml")


def test_kv_cache_larger_than_resident(tmp_path: Path) -> None:
    path = write(tmp_path, edited("kv_cache_memory: 2 GiB}", "kv_cache_memory: 12 GiB}"))
    with pytest.raises(
        CatalogueError, match=r"kv_cache_memory \(12884901888 B\) is more than resident"
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[2]"


@pytest.mark.parametrize("spelling", ["Card", "whole", "ALL"])
def test_a_whole_card_is_spelled_card(tmp_path: Path, spelling: str) -> None:
    path = write(tmp_path, edited("bytes: card", f"bytes: {spelling}"))
    with pytest.raises(CatalogueError, match="write the whole card as `card`") as caught:
        load_catalogue(path)
    assert caught.value.loc == "reserves[0].bytes"


def test_nesting_a_whole_mebibyte_deep_is_refused_not_a_crash(tmp_path: Path) -> None:
    # libyaml's parser is iterative, and its events are composed under our cap: no C recursion.
    depth = (MAX_DOCUMENT_BYTES - 16) // 2
    with pytest.raises(CatalogueError, match="nests deeper than 64 levels"):
        load_catalogue(write(tmp_path, "hosts: " + "[" * depth + "]" * depth + "\n"))


PARITY = [
    (Path(__file__).resolve().parents[2] / "seats/catalogue/fv-ml1.yaml").read_text(),
    "a: &x {b: [1, 2.5, null, true, '0.11']}\nc: *x\nd: {<<: *x, e: 2026-09-16}\n",
    "hosts: &a [*a]\n",
    "hosts: " + "[" * 100 + "]" * 100 + "\n",
    "hosts: {a: 1, a: 2}\n",
    "hosts: \x1f\n",
    "x: !!python/object/apply:os.system [ls]\n",
    "a: 1\n---\nb: 2\n",
    "hosts: [unclosed\n  : : {\n",
    BILLION_LAUGHS,
]


@pytest.mark.parametrize("text", PARITY, ids=range(len(PARITY)))
def test_libyaml_and_pure_python_read_alike(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from seats import loader

    def outcome() -> object:
        try:
            return read_yaml(text, "f.yaml")
        except CatalogueError as exc:
            if exc.msg.startswith("not valid YAML:"):
                # libyaml words a syntax error its own way; the line it names is the same.
                return ("syntax", exc.loc, exc.msg.rsplit("(", 1)[-1])
            return ("error", exc.loc, exc.msg)

    fast = outcome()
    monkeypatch.setattr(loader, "_UniqueKeyLoader", loader._PureLoader)
    assert outcome() == fast
