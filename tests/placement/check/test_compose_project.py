"""The project docker would start: compose-go's merge tables and loader cases, and the override file.

The tables and files are compose-go's own (tests/placement/check/data/compose-go/README.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from placement.check.compose import ComposeError, load_compose
from placement.check.compose.interpolation import substitute
from placement.check.compose.merge import enforce_unicity, merge
from placement.check.compose.project import MAX_FILES, load_project

DATA = Path(__file__).parent / "data" / "compose-go"
TABLES = yaml.safe_load((DATA / "merge-tables.yaml").read_text(encoding="utf-8"))
LOADER = DATA / "loader"


@pytest.mark.parametrize("case", TABLES["merge"], ids=lambda c: f"{c['source']}:{c['test']}")
def test_compose_go_merge_table(case: dict[str, str]) -> None:
    got = merge(yaml.safe_load(case["base"]), yaml.safe_load(case["override"]))
    assert got == yaml.safe_load(case["want"])


@pytest.mark.parametrize("case", TABLES["unicity"], ids=lambda c: c["test"])
def test_compose_go_unicity_table(case: dict[str, str]) -> None:
    assert enforce_unicity(yaml.safe_load(case["input"])) == yaml.safe_load(case["want"])


def test_the_tables_are_all_there() -> None:
    # 65 assertMergeYaml calls and Test_mergeOverrides, less the three left out (see the header).
    assert len(TABLES["merge"]) == 65 and len(TABLES["unicity"]) == 2


def project(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> Any:
    path = tmp_path / "compose.yaml"
    path.write_text(text, encoding="utf-8")
    return load_project([path], environ or {}, find_override=True)


def test_load_with_include(tmp_path: Path) -> None:
    """compose-go TestLoadWithInclude: the include's env file sizes its variables; the caller's wins."""
    text = (
        "include:\n"
        f"  - path: {LOADER}/subdir/compose-test-extends-imported.yaml\n"
        f"    env_file: {LOADER}/subdir/extra.env\n"
        "services:\n  foo:\n    image: busybox\n    depends_on: [imported]\n"
    )
    loaded = project(tmp_path, text)
    imported = loaded.services["imported"]
    assert imported["env_file"] == [str(LOADER / "subdir" / "extra.env")]
    assert imported["volumes"] == ["/opt/data:/var/lib/mysql"]
    name = substitute(imported["container_name"], loaded.lookups["imported"]).text
    assert name == "extends"
    again = project(tmp_path, text, {"SOURCE": "override"})
    assert substitute(imported["container_name"], again.lookups["imported"]).text == "override"
    assert loaded.origins["imported"].endswith("compose-test-extends-imported.yaml")


def test_load_with_include_relative_paths() -> None:
    """include/compose.yaml: the included file's `./` is its own directory."""
    loaded = load_project([LOADER / "include" / "compose.yaml"], {}, find_override=True)
    assert loaded.services["included"]["volumes"] == [f"{LOADER / 'include'}:/mnt"]


def test_load_with_include_cycle() -> None:
    with pytest.raises(ComposeError, match="include cycle"):
        load_project([LOADER / "compose-include-cycle.yaml"], {}, find_override=True)


def test_load_with_include_override(tmp_path: Path) -> None:
    """compose-go TestLoadWithIncludeOverride: a later file overrides an included service."""
    main = tmp_path / "a.yaml"
    main.write_text(
        f"include:\n  - {LOADER}/subdir/compose-test-extends-imported.yaml\n", encoding="utf-8"
    )
    over = tmp_path / "b.yaml"
    over.write_text("services:\n  imported:\n    image: overridden\n", encoding="utf-8")
    loaded = load_project([main, over], {}, find_override=False)
    assert loaded.services["imported"]["image"] == "overridden"


def test_load_extends(tmp_path: Path) -> None:
    """compose-go TestLoadExtends and TestLoadExtendsOverrideCommand."""
    loaded = project(
        tmp_path,
        "services:\n  foo:\n    image: busybox\n    extends: bar\n"
        "  bar:\n    image: alpine\n    command: echo\n",
    )
    assert loaded.services["foo"] == {"image": "busybox", "command": "echo"}
    loaded = project(
        tmp_path,
        "services:\n  foo:\n    image: busybox\n    extends:\n      service: bar\n"
        '    command: "/bin/ash -c \\"rm -rf /tmp/might-not-exist\\""\n'
        '  bar:\n    image: alpine\n    command: "/bin/ash -c \\"echo Oh no...\\""\n',
    )
    assert loaded.services["foo"]["command"] == '/bin/ash -c "rm -rf /tmp/might-not-exist"'


def test_load_extends_from_files_in_other_directories() -> None:
    """extends/withdir: dir/compose.yaml extends base.yaml beside itself, not beside the root."""
    loaded = load_project([LOADER / "extends" / "withdir" / "compose.yaml"], {}, find_override=True)
    assert loaded.services["test"] == {"image": "hello-world"}
    based = load_project([LOADER / "extends" / "base.yaml"], {}, find_override=True)
    assert based.services["another"] == {"image": "base"}


def test_extends_a_missing_service_names_it(tmp_path: Path) -> None:
    with pytest.raises(ComposeError, match="service 'nope' not found"):
        project(tmp_path, "services:\n  a:\n    image: x\n    extends: nope\n")


GPU0 = "    deploy: {resources: {reservations: {devices: [{driver: nvidia, device_ids: ['0'], capabilities: [gpu]}]}}}\n"
BASE = (
    "services:\n  v:\n    image: vllm/vllm-openai:v0.11.0\n    command: [--model, m, --gpu-memory-utilization, '0.05']\n"
    + GPU0
)


@pytest.mark.parametrize(
    "override",
    ["compose.override.yml", "compose.override.yaml", "docker-compose.override.yml", "docker-compose.override.yaml"],
)  # fmt: skip
def test_the_override_beside_the_file_is_merged(tmp_path: Path, override: str) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(BASE, encoding="utf-8")
    (tmp_path / override).write_text(
        "services:\n  v:\n    command: [--model, m, --gpu-memory-utilization, '0.5']\n",
        encoding="utf-8",
    )
    loaded = load_compose(path, {})
    assert loaded.services[0].util_text == "0.5"
    assert loaded.files == (str(path), str(tmp_path / override))
    assert loaded.notes[0].startswith(f"merged {tmp_path / override} over {path}")
    # Given as -f files, the override is not read: `docker compose -f compose.yaml` ignores it.
    alone = load_compose([path], {})
    assert alone.services[0].util_text == "0.05" and alone.files == (str(path),)


def test_docker_uses_the_first_override_name(tmp_path: Path) -> None:
    path = tmp_path / "docker-compose.yml"
    path.write_text(BASE, encoding="utf-8")
    for name, util in (("compose.override.yaml", "0.2"), ("docker-compose.override.yml", "0.3")):
        (tmp_path / name).write_text(
            f"services:\n  v:\n    command: [--gpu-memory-utilization, '{util}']\n",
            encoding="utf-8",
        )
    loaded = load_compose(path, {})
    assert loaded.services[0].util_text == "0.2"
    assert "several override files" in loaded.notes[1]


def test_an_override_beside_a_file_docker_would_not_find_is_not_merged(tmp_path: Path) -> None:
    path = tmp_path / "stack.yaml"
    path.write_text(BASE, encoding="utf-8")
    (tmp_path / "compose.override.yaml").write_text(
        "services:\n  v:\n    command: [--gpu-memory-utilization, '0.9']\n", encoding="utf-8"
    )
    loaded = load_compose(path, {})
    assert loaded.services[0].util_text == "0.05"
    assert "is not merged" in loaded.notes[0]


def test_several_files_merge_in_order(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in ("a.yaml", "b.yaml", "c.yaml"))
    a.write_text(BASE, encoding="utf-8")
    b.write_text(
        "services:\n  v:\n    command: [--gpu-memory-utilization, '0.2']\n", encoding="utf-8"
    )
    c.write_text("services:\n  v:\n    environment: [CUDA_VISIBLE_DEVICES=0]\n", encoding="utf-8")
    loaded = load_compose([a, b, c], {})
    (service,) = loaded.services
    assert service.util_text == "0.2" and service.visible == ("0",)
    assert "as `docker compose -f" in loaded.notes[0]


def test_compose_profiles_from_the_environment_and_dotenv(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(
        BASE + "  debug:\n    image: vllm/vllm-openai:v0.11.0\n    profiles: [debug]\n"
        "    command: [--model, m, --gpu-memory-utilization, '0.05']\n" + GPU0,
        encoding="utf-8",
    )
    assert [s.name for s in load_compose(path, {}).services] == ["v"]
    on = load_compose(path, {"COMPOSE_PROFILES": "other,debug"})
    assert [s.name for s in on.services] == ["v", "debug"]
    (tmp_path / ".env").write_text("COMPOSE_PROFILES=debug\n", encoding="utf-8")
    assert [s.name for s in load_compose(path, {}).services] == ["v", "debug"]
    # --profile given: COMPOSE_PROFILES is not read (compose-go WithDefaultProfiles).
    assert [s.name for s in load_compose(path, {}, profiles=["x"]).services] == ["v"]
    assert [s.name for s in load_compose(path, {}, profiles=["*"]).services] == ["v", "debug"]


def test_a_missing_include_names_it(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text("include: [gpu/models.yaml]\n" + BASE, encoding="utf-8")
    with pytest.raises(ComposeError, match=r"include: .*gpu/models.yaml does not exist"):
        load_compose(path, {})


def test_load_with_reset(tmp_path: Path) -> None:
    """compose-go loader/merge_reset_test.go Test_LoadWithReset: `!reset` drops what base.yml set."""
    base = tmp_path / "base.yml"
    base.write_text(
        "\n name: test\n services:\n   foo:\n     build:\n       context: .\n"
        "       dockerfile: foo.Dockerfile\n     environment:\n       FOO: BAR",
        encoding="utf-8",
    )
    override = tmp_path / "override.yml"
    override.write_text(
        "\n services:\n   foo:\n     image: foo\n     build: !reset  \n     environment:\n"
        "       FOO: !reset\n",
        encoding="utf-8",
    )
    loaded = load_project([base, override], {}, find_override=False)
    foo = loaded.services["foo"]
    # compose-go's types.MappingWithEquals{}: no variable left (here an empty KEY=value list).
    assert foo["image"] == "foo" and "build" not in foo and not foo["environment"]


def test_an_override_moves_a_service_to_another_card(tmp_path: Path) -> None:
    """Lists are appended (both device requests), unless the override says `!override`."""
    path = tmp_path / "compose.yaml"
    path.write_text(BASE, encoding="utf-8")
    moved = "services:\n  v:\n    deploy: {resources: {reservations: {devices: %s[{driver: nvidia, device_ids: ['2'], capabilities: [gpu]}]}}}\n"
    override = tmp_path / "compose.override.yaml"
    override.write_text(moved % "", encoding="utf-8")
    assert load_compose(path, {}).services[0].devices == ("0", "2")
    override.write_text(moved % "!override ", encoding="utf-8")
    assert load_compose(path, {}).services[0].devices == ("2",)
    override.write_text("services:\n  v: !reset\n", encoding="utf-8")
    with pytest.raises(ComposeError, match="the file has no `services:` mapping"):
        load_compose(path, {})


def test_an_entry_both_files_name_is_there_once(tmp_path: Path) -> None:
    """compose-go enforces unicity after every file it merges: a device, a mount or a variable
    the override names again is one entry with the later value, never a second card."""
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  v:\n    image: vllm/vllm-openai:v0.11.0\n"
        "    command: [--model, m, --tensor-parallel-size, '2']\n"
        "    devices: [nvidia.com/gpu=0]\n    volumes: ['./a:/models']\n"
        "    environment: [CUDA_VISIBLE_DEVICES=0]\n",
        encoding="utf-8",
    )
    (tmp_path / "compose.override.yaml").write_text(
        "services:\n  v:\n    devices: [nvidia.com/gpu=0]\n    volumes: ['./b:/models']\n"
        "    environment: [CUDA_VISIBLE_DEVICES=0]\n",
        encoding="utf-8",
    )
    merged = load_project([path], {}, find_override=True).services["v"]
    assert merged["devices"] == ["nvidia.com/gpu=0"]
    assert merged["volumes"] == ["./b:/models"]
    assert merged["environment"] == ["CUDA_VISIBLE_DEVICES=0"]
    (service,) = load_compose(path, {}).services
    assert service.devices == ("0",) and service.tensor_parallel_size == 2


def test_a_file_many_services_extend_is_read_once(tmp_path: Path) -> None:
    """More services than MAX_FILES extend one file: it is one file read, not one per service."""
    (tmp_path / "base.yaml").write_text(
        "services:\n  base:\n    image: busybox\n", encoding="utf-8"
    )
    many = MAX_FILES + 6
    text = "services:\n" + "".join(
        f"  s{i}:\n    extends: {{file: base.yaml, service: base}}\n" for i in range(many)
    )
    loaded = project(tmp_path, text)
    assert len(loaded.services) == many and loaded.services[f"s{many - 1}"] == {"image": "busybox"}
    assert loaded.files == [str(tmp_path / "compose.yaml"), str(tmp_path / "base.yaml")]
