"""The pre-deploy check: one seat (from the catalogue or a compose service) judged on given cards.

Pure core: it builds the seat as it will start and asks the verifier (`placement.fit.verify.judge`);
what it adds is the warnings that do not refuse (LoRA, util vs resident, compose vs catalogue).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from inventory.attribution import attribute, host_seats, match_seat, server_line
from inventory.snapshot import Process, Snapshot, format_utc
from placement.check.elsewhere import Elsewhere
from placement.decisions import inputs_digest as digest_of
from placement.fit.beside import unseated_seat
from placement.fit.capacity import cuda_context_bytes
from placement.fit.card import cuda_total
from placement.fit.engines import (
    cover_target,
    engine_of,
    format_util,
    requested_bytes,
    requests_util,
    util_decimal,
)
from placement.fit.engines.note import Said, note
from placement.fit.engines.registry import engine as registry_engine
from placement.fit.engines.registry import spec_of
from placement.fit.kv import flag_resident, profile_of
from placement.fit.verdict import Verdict
from placement.fit.verify import judge, override_seat
from seats.errors import BadInputError, Exit
from seats.model import Catalogue, Engine, Profile, Seat
from seats.units import format_bytes

if TYPE_CHECKING:
    # The compose reader is imported only where a compose file is judged: `check SEAT` runs
    # in every deploy script and does not pay for it.
    from placement.check.compose import ComposeService

SCHEMA = 1
_EXIT = {"pass": Exit.OK, "refuse": Exit.REFUSED, "unknown": Exit.CANNOT_DECIDE}


@dataclass(frozen=True)
class CheckResult:
    """One verdict with the seat as judged, the snapshot it was judged on, and where it came from."""

    verdict: Verdict
    seat: Seat
    snapshot: Snapshot
    resident_known: bool = True
    service: str | None = None
    # Other cards and hosts that would take the seat, where it was refused (placement.check.nearest).
    elsewhere: tuple[Elsewhere, ...] = ()

    @property
    def exit_code(self) -> Exit:
        """0 pass, 1 refuse, 3 unknown (a card in error)."""
        return _EXIT[self.verdict.verdict]

    def to_json(self) -> dict[str, Any]:
        """DESIGN.md's VERDICT plus the figures per card, raw byte ints."""
        data = self.verdict.to_json()
        data["resident_known"] = self.resident_known
        data["resident_bytes"] = self.seat.resident_bytes if self.resident_known else None
        if self.service is not None:
            data["service"] = self.service
        if self.verdict.verdict == "refuse":
            data["nearest_cards"] = [e.to_json() for e in self.elsewhere]
        data["snapshot"] = {
            "host": self.snapshot.host,
            "taken_at": format_utc(self.snapshot.taken_at),
        }
        data["card_figures"] = [asdict(f) for f in self.verdict.figures]
        return data


def did_you_mean(word: str, names: Sequence[str]) -> str:
    """`; did you mean vllm-voices?` for a misspelt name, from difflib's close matches; else ""."""
    import difflib  # only when a name is misspelt: `check` in a deploy script does not pay for it

    close = difflib.get_close_matches(word, list(names), n=3)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def pick_snapshot(snapshots: Sequence[Snapshot], host: str | None) -> Snapshot:
    """The snapshot of `host`; the only one when no host is named. BadInputError otherwise."""
    hosts = [snapshot.host for snapshot in snapshots]
    if host is not None:
        for snapshot in snapshots:
            if snapshot.host == host:
                return snapshot
        if len(snapshots) == 1:
            # The verifier refuses it with rule `host`, naming both.
            return snapshots[0]
        raise BadInputError(
            f"no snapshot of host {host}{did_you_mean(host, hosts)} (snapshots of {', '.join(hosts)})"
        )
    if len(snapshots) == 1:
        return snapshots[0]
    raise BadInputError(f"snapshots of several hosts ({', '.join(hosts)}): pass --host")


def _check_cards(snapshot: Snapshot, cards: Sequence[int], what: str) -> tuple[int, ...]:
    indices = sorted(card.index for card in snapshot.cards)
    for index in cards:
        if index not in indices:
            raise BadInputError(
                f"{what}: host {snapshot.host} has cards {', '.join(map(str, indices))}; there is no card {index}"
            )
    if len(set(cards)) != len(cards):
        raise BadInputError(f"{what}: card list {list(cards)} names a card twice")
    return tuple(cards)


def check_seat(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    name: str,
    cards: Sequence[int] | None = None,
    *,
    host: str | None = None,
    util: Decimal | None = None,
    kv_cache_bytes: int | None = None,
    resident_bytes: int | None = None,
) -> CheckResult:
    """`gpuplan check SEAT --gpu N`: the catalogue's seat (flags override its fields) on `cards`."""
    try:
        seat = catalogue.seat(name)
    except KeyError:
        names = [s.name for s in catalogue.seats]
        raise BadInputError(
            f"no seat named {name!r} in the catalogue{did_you_mean(name, names)} "
            f"(seats: {', '.join(names) or 'none'}; a seat not in the catalogue yet: --add SEAT.yaml)"
        ) from None
    snapshot = pick_snapshot(snapshots, host or seat.host)
    if cards is None:
        if seat.pinned_cards is None:
            raise BadInputError(f"seat {name!r} names no cards; pass --gpu N[,M]")
        cards = seat.pinned_cards
    cards = _check_cards(snapshot, cards, "--gpu")
    if len(cards) != seat.card_count:
        raise BadInputError(
            f"seat {name!r} takes {seat.card_count} card(s) (tensor parallel); --gpu gives {len(cards)}"
        )
    warnings: list[Said] = []
    if seat.state == "retired":
        warnings.append(f"{name} is retired in the catalogue")
    if (kv_cache_bytes is not None or util is not None) and not requests_util(seat.engine):
        raise BadInputError(
            f"seat {name!r} is not a vLLM seat: --util and --kv-cache-memory do not apply"
        )
    judged = seat.model_copy(update={"gpus": tuple(cards), "host": seat.host or snapshot.host})
    attributed = attribute(snapshot, catalogue)
    final = override_seat(judged, util, kv_cache_bytes, resident_bytes)
    _refuse_flags(seat, final, kv_cache_bytes, resident_bytes)
    final, why = _with_flag_resident(
        catalogue, snapshot.host, seat, final, resident_given=resident_bytes is not None
    )
    warnings += why
    verdict = judge(catalogue, attributed, final, cards, mode="check")
    warnings += _redeploy_notes(attributed, final.name, cards)
    warnings += _lora_warnings(final, None)
    warnings += _cover_warnings(catalogue, attributed, final, verdict)
    return CheckResult(with_warnings(verdict, warnings), final, attributed)


def check_service(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    service: ComposeService,
    *,
    host: str | None = None,
    rank: int = 0,
) -> CheckResult:
    """`gpuplan check --compose FILE`: one service (one data-parallel engine of a vLLM one) as the
    file will start it: its catalogue seat with the engine its flags build, else the seat fit
    judges a service nobody declared as (vLLM on its gate; another engine where fit.beside's
    `unseated_seat` says its verdict does not rest on its resident)."""
    from placement.check.compose import resolve_cards

    seat = catalogue_seat(catalogue, service, snapshots)
    snapshot = pick_snapshot(snapshots, host or (seat.host if seat else None))
    every_card = resolve_cards(service, snapshot.host, snapshot.cards)
    size = len(every_card) if service.all_cards else service.world_size
    cards = every_card[rank * size : (rank + 1) * size]
    warnings: list[Said] = list(service.notes)
    version = service.version
    if seat is not None and seat.engine.version is not None:
        if version is None:
            version = seat.engine.version
        warnings += version_notes(seat, service)
    profile, notes = _service_profile(seat, service)
    warnings += notes
    engine = service_spec(service, version, profile)
    resident_known = seat is not None
    if seat is not None:
        warnings += _disagreements(seat, service, every_card)
        judged = seat.model_copy(
            update={"gpus": cards, "host": seat.host or snapshot.host, "engine": engine}
        )
        judged, why = _with_flag_resident(
            catalogue, snapshot.host, seat, judged, resident_given=False
        )
        warnings += why
        attributed = attribute(snapshot, catalogue)
    else:
        judged, how = _unseated(service, snapshot.host, cards, engine)
        warnings.append(how)
        attributed = _attribute_by_port(attribute(snapshot, catalogue), service)
    verdict = judge(
        catalogue, attributed, judged, cards, mode="check", need_floor=not resident_known
    )
    warnings += _redeploy_notes(attributed, judged.name, cards)
    warnings += _lora_warnings(judged if seat is not None else None, service)
    if resident_known:
        warnings += _cover_warnings(catalogue, attributed, judged, verdict)
    return CheckResult(
        with_warnings(verdict, warnings),
        judged,
        attributed,
        resident_known=resident_known,
        service=service.name,
    )


def _unseated(
    service: ComposeService, host: str, cards: tuple[int, ...], engine: Engine
) -> tuple[Seat, Said]:
    """The seat a service that no catalogue seat matches is judged as, and how (a warning)."""
    head = (
        f"resident unknown: no catalogue seat matches service {service.name} "
        "(add `x-gpuplan-seat: NAME` or a seat whose `match` finds its command); "
    )
    rule = engine_of(engine)
    if not rule.util_request:
        seat = unseated_seat(service.name, host, cards, engine)
        if seat is None:
            from placement.check.compose import ComposeError

            raise ComposeError(
                service.path, service.name, None, f"its {rule.title} needs its catalogue seat"
            )
        return seat, note(
            "unseated_unbounded", service=service.name, why=rule.unbounded_why(engine)
        )
    # Unknown resident: a lower bound keeps room honest (a refusal on it is certain); the
    # gate, the engine's own rule, is judged exactly.
    lower = service.kv_cache_bytes or 1
    seat = Seat(
        name=service.name, host=host, gpus=cards, resident=lower, state="planned", engine=engine
    )
    return seat, head + (
        (
            f"room judged on a lower bound, its {format_bytes(lower)} KV cache; "
            if service.kv_cache_bytes
            else "room judged on its request alone; "
        )
        + f"the {rule.title} gate is judged exactly"
    )


def service_spec(
    service: ComposeService,
    version: str | None,
    profile: Profile | None,
    catalogue_fields: Mapping[str, object] | None = None,
) -> Engine:
    """The engine block a compose service starts with, built by its engine from the fields its
    flags set (`registry.spec_of`) over `catalogue_fields` (its seat's); an error names the
    service."""
    from pydantic import ValidationError

    fields = {**(catalogue_fields or {}), **dict(service.engine_fields)}
    try:
        return spec_of(service.engine or "other", fields, version=version, profile=profile)
    except ValidationError as exc:
        from placement.check.compose import ComposeError

        raise ComposeError(
            service.path, service.name, None, f"its engine flags are not valid: {exc}"
        ) from None


def version_notes(seat: Seat, service: ComposeService) -> list[str]:
    """A compose image whose tag names another version of its engine than the catalogue's seat
    says: judged as the image's (it is what `docker compose up` starts)."""
    said, found = seat.engine.version, service.version
    if said is None or found is None or said == found or service.engine is None:
        return []
    title = registry_engine(service.engine).title
    return [
        f"compose image {service.image} is {title} {found}; the catalogue says {said} for "
        f"{seat.name} (judged as {found})"
    ]


def _refuse_flags(
    seat: Seat, final: Seat, kv_cache_bytes: int | None, resident_bytes: int | None
) -> None:
    """Flags the loader would refuse in a file: a resident below the weights, a KV above it."""
    profile = profile_of(seat)
    weights = profile.weights_bytes if profile is not None else seat.weights_bytes
    if resident_bytes is not None and weights is not None and resident_bytes < weights:
        raise BadInputError(
            f"--resident {format_bytes(resident_bytes)} ({resident_bytes} B) is below seat "
            f"{seat.name}'s weights {format_bytes(weights)} ({weights} B): resident is everything "
            "the seat holds on a card, weights included"
        )
    kv = final.engine.kv_cache_bytes
    if kv is None or (kv_cache_bytes is None and resident_bytes is None):
        return
    declared = seat.engine.kv_cache_bytes
    if resident_bytes is not None and kv > resident_bytes:
        raise BadInputError(
            f"KV cache {format_bytes(kv)} ({kv} B) is more than --resident "
            f"{format_bytes(resident_bytes)} ({resident_bytes} B): resident is everything the "
            "seat holds on a card, its KV cache included"
        )
    if resident_bytes is None and declared is None and kv > seat.resident_bytes:
        raise BadInputError(
            f"--kv-cache-memory {format_bytes(kv)} ({kv} B) is more than seat {seat.name}'s "
            f"resident {format_bytes(seat.resident_bytes)} ({seat.resident_bytes} B), and the "
            "catalogue declares no KV size to say how the resident grows with it: give "
            "--resident too"
        )


def _with_flag_resident(
    catalogue: Catalogue, host: str, declared: Seat, judged: Seat, *, resident_given: bool
) -> tuple[Seat, list[Said]]:
    """`judged` with the resident its flags imply (placement.fit.kv.flag_resident), and why."""
    ctx = cuda_context_bytes(catalogue, host)
    found = flag_resident(declared, judged, ctx, resident_given=resident_given)
    if found.resident_bytes == judged.resident_bytes or found.why is None:
        return judged, []
    return judged.model_copy(update={"resident_bytes": found.resident_bytes}), [
        note(
            "judged_resident", seat=judged.name, resident_bytes=found.resident_bytes, why=found.why
        )
    ]


def _service_profile(
    seat: Seat | None, service: ComposeService
) -> tuple[Profile | None, list[str]]:
    """The catalogue seat's profile as the service's command changes it.

    `--max-model-len` is the sequence rule `kv_capacity` must hold; `--kv-cache-dtype fp8…`
    stores each KV element in one byte where the profile's (learnt at the model's 16-bit
    dtype) takes two: half the bytes per token, rounded up.
    """
    profile = profile_of(seat) if seat is not None else None
    notes: list[str] = []
    if profile is None:
        if service.max_model_len is not None and seat is not None:
            notes.append(
                f"service {service.name} --max-model-len {service.max_model_len:,}: the catalogue's "
                f"{seat.name} has no profile, so rule kv_capacity cannot be judged "
                f"(gpuplan learn {seat.name} --vllm-log … gives one)"
            )
        return None, notes
    update: dict[str, int] = {}
    if service.max_model_len is not None and service.max_model_len != profile.max_model_len:
        update["max_model_len"] = service.max_model_len
        notes.append(
            f"service {service.name} --max-model-len {service.max_model_len:,} (the profile of "
            f"{seat.name if seat else '?'} says {profile.max_model_len:,}): judged with the file's"
        )
    dtype = service.kv_cache_dtype
    if service.engine is not None and registry_engine(service.engine).one_byte_kv(dtype):
        halved = -(-profile.kv_bytes_per_token // 2)
        update["kv_bytes_per_token"] = halved
        notes.append(
            f"service {service.name} --kv-cache-dtype {dtype}: {halved:,} B per token, half the "
            f"profile's {profile.kv_bytes_per_token:,} B (learnt at the model's 16-bit dtype)"
        )
    return (profile.model_copy(update=update) if update else profile), notes


def catalogue_seat(
    catalogue: Catalogue, service: ComposeService, snapshots: Sequence[Snapshot]
) -> Seat | None:
    """The catalogue seat a service is: `x-gpuplan-seat`, else a seat's `match` on its command."""
    if service.seat is not None:
        try:
            return catalogue.seat(service.seat)
        except KeyError:
            from placement.check.compose import ComposeError

            raise ComposeError(
                service.path,
                service.name,
                "x-gpuplan-seat",
                f"{service.seat!r} names no seat of the catalogue"
                + did_you_mean(service.seat, [s.name for s in catalogue.seats]),
            ) from None
    hosts = {snapshot.host for snapshot in snapshots}
    candidates = [seat for host in sorted(hosts) for seat in host_seats(catalogue, host)]
    name = match_seat(service.cmdline, candidates)
    return catalogue.seat(name) if name is not None else None


def _attribute_by_port(snapshot: Snapshot, service: ComposeService) -> Snapshot:
    """Mark the service's own running process (its engine's, on its port) so a redeploy frees
    it first."""
    if service.port is None or service.engine is None:
        return snapshot
    rule = registry_engine(service.engine)
    pattern = re.compile(rf"--port[ =]{service.port}\b")
    cards = []
    for card in snapshot.cards:
        processes: list[Process] = []
        for process in card.processes:
            line = server_line(process)  # a `VLLM::EngineCore` by its API server's line
            if (
                process.seat is None
                and line
                and pattern.search(line)
                and rule.recognise(line.split())
            ):
                process = process.model_copy(update={"seat": service.name})
            processes.append(process)
        cards.append(card.model_copy(update={"processes": tuple(processes)}))
    return snapshot.model_copy(update={"cards": tuple(cards)})


def with_warnings(verdict: Verdict, extra: Sequence[Said]) -> Verdict:
    """`verdict` with `extra` warnings after its own, each once."""
    return replace(verdict, warnings=tuple(dict.fromkeys([*verdict.warnings, *extra])))


def _redeploy_notes(snapshot: Snapshot, name: str, cards: Sequence[int]) -> list[str]:
    notes = []
    for card in snapshot.cards:
        if card.index not in cards:
            continue
        own = [p for p in card.processes if p.seat == name]
        if own:
            held = sum(p.used_bytes or 0 for p in own)
            pids = ", ".join(str(p.pid) for p in own)
            notes.append(
                f"{name} already runs on card {card.index} (pid {pids}, {format_bytes(held)}): "
                "judged as a redeploy, its bytes freed first"
            )
    return notes


def _lora_warnings(seat: Seat | None, service: ComposeService | None) -> list[str]:
    """Adapters the next `docker compose up -d` drops (the seed: runtime loads do not persist)."""
    out: list[str] = []
    adapters = seat.lora.adapters if seat is not None and seat.lora is not None else ()
    if service is None:
        for adapter in adapters:
            if not adapter.persisted:
                out.append(
                    f"LoRA adapter {adapter.name} of {seat.name if seat else '?'} is runtime-loaded "
                    "(persisted: false): the next `docker compose up -d` drops it; add it to --lora-modules to keep it"
                )
        return out
    listed = set(service.lora_modules)
    for adapter in adapters:
        if adapter.name in listed:
            continue
        how = (
            "is runtime-loaded (persisted: false)"
            if not adapter.persisted
            else "is marked persisted in the catalogue"
        )
        out.append(
            f"LoRA adapter {adapter.name} {how} but not in the service's --lora-modules: "
            "the next `docker compose up -d` drops it"
        )
    if seat is not None:
        known = {adapter.name for adapter in adapters}
        extra = [name for name in service.lora_modules if name not in known]
        if extra:
            out.append(
                f"--lora-modules names {', '.join(extra)}, which the catalogue's {seat.name} does not list"
            )
    if service.runtime_lora and not adapters:
        out.append(
            f"{service.name} allows runtime LoRA loading (VLLM_ALLOW_RUNTIME_LORA_UPDATING): adapters "
            "loaded at runtime are gone after the next `docker compose up -d` unless in --lora-modules"
        )
    return out


def _cover_warnings(
    catalogue: Catalogue, snapshot: Snapshot, seat: Seat, verdict: Verdict
) -> list[str]:
    """A util whose request does not cover the declared resident: vLLM's gate no longer checks the whole seat."""
    if not requests_util(seat.engine) or verdict.util is None:
        return []
    util = util_decimal(verdict.util)
    said = "" if seat.engine.gpu_memory_utilization is not None else " (the version's default)"
    ctx = cuda_context_bytes(catalogue, snapshot.host)
    target = cover_target(seat.resident_bytes, seat.engine.kv_cache_bytes, ctx)
    out = []
    for card in snapshot.cards:
        if card.index not in verdict.cards or not card.ok:
            continue
        requested = requested_bytes(util, cuda_total(card))
        if requested < target:
            if seat.engine.kv_cache_bytes is not None:
                why = f"the declared resident {format_bytes(seat.resident_bytes)}"
            else:
                why = f"the declared resident {format_bytes(seat.resident_bytes)} less its {format_bytes(ctx)} CUDA context"
            out.append(
                f"util {format_util(util)}{said} requests {format_bytes(requested)} on card {card.index}, less than "
                f"{why}: vLLM's own gate does not cover the whole seat (short {format_bytes(target - requested)})"
            )
    return out


def _disagreements(seat: Seat, service: ComposeService, cards: Sequence[int]) -> list[str]:
    out: list[str] = []
    name = f"service {service.name}"
    catalogue_util = seat.engine.gpu_memory_utilization
    flag_of = engine_of(seat.engine).flag_of
    util_flag = flag_of("gpu_memory_utilization")
    kv_flag = flag_of("kv_cache_bytes")
    if service.util is None and catalogue_util is not None:
        out.append(
            f"{name} passes no {util_flag}; the catalogue's {seat.name} declares "
            f"{util_decimal(catalogue_util)} (judged without it, as the file will start)"
        )
    elif (
        service.util is not None
        and catalogue_util is not None
        and service.util != util_decimal(catalogue_util)
    ):
        out.append(
            f"{name} {util_flag} {service.util_text} disagrees with the catalogue's "
            f"{util_decimal(catalogue_util)} for {seat.name} (judged with {service.util_text})"
        )
    catalogue_kv = seat.engine.kv_cache_bytes
    if service.kv_cache_bytes != catalogue_kv:
        out.append(
            f"{name} {kv_flag} {_bytes_or_none(service.kv_cache_bytes)} disagrees with the "
            f"catalogue's {_bytes_or_none(catalogue_kv)} for {seat.name} (judged with the file's)"
        )
    if seat.pinned_cards is not None and tuple(seat.pinned_cards) != tuple(cards):
        out.append(
            f"{name} starts on card(s) {', '.join(map(str, cards))}; the catalogue pins {seat.name} to "
            f"{', '.join(map(str, seat.pinned_cards))}"
        )
    if seat.lora is not None:
        for field, mine, theirs in (
            ("max_loras", service.max_loras, seat.lora.max_loras),
            ("max_lora_rank", service.max_lora_rank, seat.lora.max_lora_rank),
        ):
            if mine is not None and mine != theirs:
                out.append(
                    f"{name} {flag_of(field)} {mine} disagrees with the catalogue's {theirs}: LoRA slot buffers "
                    f"change the resident {format_bytes(seat.resident_bytes)} it declares"
                )
    elif service.lora_enabled:
        out.append(f"{name} enables LoRA; the catalogue's {seat.name} declares no lora block")
    return out


def _bytes_or_none(value: int | None) -> str:
    return "none" if value is None else f"{format_bytes(value)} ({value} B)"


def inputs_digest(result: CheckResult) -> str:
    """sha256 of what the verdict rests on: the seat as judged, its cards and the snapshot's identity."""
    payload = {
        "seat": result.seat.model_dump(mode="json", by_alias=True),
        "cards": list(result.verdict.cards),
        "host": result.snapshot.host,
        "taken_at": format_utc(result.snapshot.taken_at),
        "service": result.service,
    }
    return digest_of(payload)


def result_json(result: CheckResult) -> dict[str, Any]:
    """`check --json` for one seat: the VERDICT plus `"schema": 1`."""
    return {"schema": SCHEMA, **result.to_json()}
