"""A compose file judged as one deploy: every GPU service (every replica) a new seat, together.

Each service is first read and judged alone (its seat, cards, warnings); then each is judged
again by the verifier as if it started last beside all the others' needs (DESIGN.md "Whole
deploys"). A bad service is an `error`; a GPU service with no known need is `unknown`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from inventory.snapshot import Snapshot
from placement.check.compose import ComposeError, ComposeFile, ComposeService, resolve_cards
from placement.check.nearest import with_nearest
from placement.check.seat import (
    CheckResult,
    catalogue_seat,
    check_seat,
    check_service,
    pick_snapshot,
    service_spec,
    version_notes,
    with_warnings,
)
from placement.fit.beside import decided, is_unbounded, judged_unseated, unbounded_beside
from placement.fit.card import CardKey, CardModel, card_model
from placement.fit.engines.note import Said, fact_json
from placement.fit.engines.registry import describe, engine, spec_of
from placement.fit.rules import replicas_reason
from placement.fit.verify import Placement, judge
from seats.errors import BadInputError, Exit
from seats.model import Catalogue, Seat
from seats.model import Engine as EngineSpec

SCHEMA = 1
Kind = Literal["pass", "refuse", "unknown", "error"]
_EXIT: dict[str, Exit] = {
    "pass": Exit.OK,
    "refuse": Exit.REFUSED,
    "error": Exit.BAD_INPUT,
    "unknown": Exit.CANNOT_DECIDE,
}
# 3 over 2 over 1 over 0 (DESIGN.md "Fleets" and "Whole deploys").
_RANK = {"pass": 0, "refuse": 1, "error": 2, "unknown": 3}


@dataclass(frozen=True)
class ServiceVerdict:
    """One service (one replica of it) of the deploy: judged (`result`), or why not (`message`)."""

    service: str
    kind: Kind
    result: CheckResult | None = None
    replica: int | None = None
    message: str | None = None
    # The data-parallel engine (--data-parallel-size N: N engines, each on its own cards).
    rank: int | None = None
    # An unknown service's cards as it asks for them (host, indices), when they can be read.
    cards: tuple[str, tuple[int, ...]] | None = None
    warnings: tuple[Said, ...] = ()
    # A service judged with no catalogue seat (fit.beside.unseated_seat): what it is where its
    # verdict, beside the rest of the deploy, is not decided (`unknown`, as without a judgement).
    undecided: ServiceVerdict | None = None
    # Final as it is: not expanded into its replicas nor judged again beside the others
    # (`replicas` replicas that cannot fit, refused at once).
    settled: bool = False
    replicas: int = 1
    # The engine the service runs, where it has no `result` to carry it (DESIGN.md, Engines:
    # every VERDICT names its engine); None where no engine recognised it.
    engine: EngineSpec | None = None

    @property
    def exit_code(self) -> Exit:
        return _EXIT[self.kind]

    @property
    def unbounded(self) -> bool:
        """True when the service's own vLLM is unbounded: it grows into what is free."""
        return self.result is not None and is_unbounded(self.result.seat)

    def to_json(self) -> dict[str, Any]:
        """A VERDICT plus "service" (and "replica"); `{"verdict": "error", "service", "message"}`."""
        if self.result is None:
            data: dict[str, Any] = {
                "verdict": self.kind,
                "service": self.service,
                "message": self.message,
            }
            if self.cards is not None:
                data["host"], data["cards"] = self.cards[0], list(self.cards[1])
            if self.warnings:
                data["warnings"] = [fact_json(w) for w in self.warnings]
            # Every VERDICT names its engine (`unknown` ones too, kind null where none was
            # recognised); a bad service only where its engine was read before it failed.
            if self.kind != "error" or self.engine is not None:
                data["engine"] = describe(self.engine)
            return data
        data = self.result.to_json()
        data["service"] = self.service
        if self.replica is not None:
            data["replica"] = self.replica
        if self.settled:
            data["replicas"] = self.replicas
        if self.rank is not None:
            data["data_parallel_rank"] = self.rank
        if self.unbounded:
            data["unbounded"] = True
        return data


@dataclass(frozen=True)
class DeployResult:
    """Every verdict of one compose file, in file order, and the deploy's own verdict."""

    compose: str
    verdicts: tuple[ServiceVerdict, ...]
    skipped: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def kind(self) -> Kind:
        worst: Kind = max((v.kind for v in self.verdicts), key=_RANK.__getitem__, default="pass")
        return worst

    @property
    def exit_code(self) -> Exit:
        return _EXIT[self.kind]

    @property
    def results(self) -> list[CheckResult]:
        return [v.result for v in self.verdicts if v.result is not None]

    def to_json(self) -> dict[str, Any]:
        """`{"schema": 1, "compose", "verdict", "verdicts": [...], "warnings"}`."""
        return {
            "schema": SCHEMA,
            "compose": self.compose,
            "files": list(self.files or (self.compose,)),
            "notes": list(self.notes),
            "verdict": self.kind,
            "verdicts": [v.to_json() for v in self.verdicts],
            "warnings": [
                fact_json(w)
                for w in dict.fromkeys(
                    [
                        *(w for r in self.results for w in r.verdict.warnings),
                        *(w for v in self.verdicts for w in v.warnings),
                    ]
                )
            ],
        }


def service_engine_seat(seat: Seat, service: ComposeService) -> tuple[Seat, list[str]]:
    """The catalogue seat with the engine a compose service runs and the fields its flags set,
    and why it differs from the catalogue's.

    The catalogue's own fields, version and profile stay where the engine is the same kind;
    a service of another kind than the catalogue says keeps only the profile (the model's bytes).
    The version its image tag names wins over the catalogue's (with a warning where they differ).
    """
    declared = seat.engine
    same = declared.kind == service.engine
    own = (
        declared.model_dump(
            by_alias=True, exclude_none=True, exclude={"kind", "version", "profile"}
        )
        if same
        else {}
    )
    version = (
        service.version if service.version is not None else (declared.version if same else None)
    )
    spec = service_spec(service, version, declared.profile, own)
    notes = version_notes(seat, service) if same else []
    return seat.model_copy(update={"engine": spec}), notes


def unknown_message(service: ComposeService) -> str:
    """Why a GPU service has no known need, and both ways to declare it."""
    if service.engine is not None:
        title = engine(service.engine).title
        return (
            f"service {service.name} runs {title} but matches no catalogue seat, so gpuplan "
            "cannot tell its resident; add `x-gpuplan-seat: NAME` naming its seat in the catalogue"
        )
    return (
        f"service {service.name} asks for a GPU but gpuplan cannot tell its need: it runs no vLLM "
        "that gpuplan can see (vllm serve, the api_server module, the vllm/vllm-openai image) and "
        "matches no catalogue seat; add `x-gpuplan-engine: vllm` to the service if it runs vLLM "
        "(its command is then read as vLLM's arguments), or `x-gpuplan-seat: NAME` naming its seat "
        "in the catalogue"
    )


def judge_deploy(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    compose: ComposeFile,
    *,
    host: str | None = None,
) -> DeployResult:
    """Judge every service of `compose` alone, then every judged one beside all the others."""
    if not compose.order:
        raise ComposeError(
            compose.path,
            None,
            "services",
            "no service asks for a GPU or runs vLLM"
            + (f" (services: {', '.join(compose.skipped)})" if compose.skipped else ""),
        )
    alone: dict[str, list[ServiceVerdict]] = {
        error.service or "": [ServiceVerdict(error.service or "", "error", message=str(error))]
        for error in compose.errors
    }
    for service in compose.services:
        verdicts = _alone(catalogue, snapshots, service, host)
        if service.replicas > 1:
            verdicts = [_beyond(verdict, service.replicas) for verdict in verdicts]
        alone[service.name] = verdicts
    replicas = {service.name: service.replicas for service in compose.services}
    judged = [
        (verdict, replica)
        for name in compose.order
        for verdict in alone[name]
        for replica in range(
            replicas.get(name, 1) if verdict.result is not None and not verdict.settled else 1
        )
    ]
    together = _together(catalogue, snapshots, judged, replicas)
    return DeployResult(compose.path, together, compose.skipped, compose.files, compose.notes)


def _alone(
    catalogue: Catalogue, snapshots: Sequence[Snapshot], service: ComposeService, host: str | None
) -> list[ServiceVerdict]:
    """The service judged on its own (each data-parallel engine of it), or error / unknown."""
    if service.unknown is not None:
        return [
            ServiceVerdict(
                service.name, "unknown", message=service.unknown, engine=_engine_of(service)
            )
        ]
    try:
        if service.engine is not None and engine(service.engine).util_request:
            ranks = service.data_parallel_size
            return [
                _verdict(
                    service,
                    check_service(catalogue, snapshots, service, host=host, rank=rank),
                    rank if ranks > 1 else None,
                )
                for rank in range(ranks)
            ]
        seat = catalogue_seat(catalogue, service, snapshots)
        if seat is None:
            return [_unseated(catalogue, snapshots, service, host)]
        notes: list[str] = []
        if service.engine is not None:
            # Judged as the file starts it: its engine and the flags its command gives.
            seat, notes = service_engine_seat(seat, service)
            catalogue = catalogue.model_copy(
                update={"seats": tuple(seat if s.name == seat.name else s for s in catalogue.seats)}
            )
        snapshot = pick_snapshot(snapshots, host or seat.host)
        cards = resolve_cards(service, snapshot.host, snapshot.cards)
        if len(cards) != seat.card_count and service.engine is not None:
            how = (
                "every card its container sees"
                if service.all_cards
                else "its command line's parallel size"
            )
            raise ComposeError(
                service.path,
                service.name,
                None,
                f"its {engine(service.engine).title} takes {len(cards)} card(s) here ({how}: "
                f"{', '.join(map(str, cards))}); the catalogue's {seat.name} takes "
                f"{seat.card_count}: give the service that many cards, or its engine that "
                "parallel size",
            )
        result = check_seat(catalogue, snapshots, seat.name, cards, host=snapshot.host)
        verdict = with_warnings(result.verdict, notes)
        return [_verdict(service, replace(result, verdict=verdict, service=service.name), None)]
    except BadInputError as exc:
        if not isinstance(exc, ComposeError):
            exc = ComposeError(service.path, service.name, None, str(exc))
        return [ServiceVerdict(service.name, "error", message=str(exc), engine=_engine_of(service))]


def _beyond(verdict: ServiceVerdict, count: int) -> ServiceVerdict:
    """`count` replicas of a judged service refused at once where they cannot all fit its cards:
    never expanded into `count` seats (DESIGN.md "Never yes by accident").

    A seat with a need: count × its need alone (at least one byte) beyond a card's total. An
    unbounded seat has no need to count: two of it on one card each leave the other no room it
    can count on (the `unbounded` rule), so any count above one is refused.
    """
    result = verdict.result
    if result is None:
        return verdict
    host, cards = result.snapshot.host, result.verdict.cards
    if verdict.unbounded:
        twin = replica_seat(result.seat, 1, verdict.rank)
        reasons = unbounded_beside(result.seat, host, cards, [(twin, host, cards)])
    else:
        needs = {figure.card: figure.need_bytes for figure in result.verdict.figures}
        totals = {card.index: card.total_bytes for card in result.snapshot.cards}
        found = (
            replicas_reason(
                count=count, card=card, need_bytes=needs.get(card, 1), total_bytes=total, host=host
            )
            for card in cards
            if (total := totals.get(card)) is not None
        )
        reasons = [reason for reason in found if reason is not None]
    if not reasons:
        return verdict
    refused = replace(result.verdict, verdict="refuse", reasons=tuple(reasons), nearest=())
    return replace(
        verdict,
        kind="refuse",
        result=replace(result, verdict=refused),
        settled=True,
        replicas=count,
        undecided=None,
    )


def _unseated(
    catalogue: Catalogue, snapshots: Sequence[Snapshot], service: ComposeService, host: str | None
) -> ServiceVerdict:
    """A GPU service of another engine than vLLM that no catalogue seat matches: judged where fit
    says its verdict does not rest on its resident (an unbounded engine), else `unknown`."""
    unknown = _unknown(service, snapshots, host)
    if service.engine is None or unknown.cards is None:
        return unknown
    if not judged_unseated(service_spec(service, service.version, None)):
        return unknown
    result = check_service(catalogue, snapshots, service, host=host)
    return replace(_verdict(service, result, None), undecided=unknown)


def _engine_of(service: ComposeService) -> EngineSpec | None:
    """The engine block a service runs, for a verdict with no judgement to carry it: built from
    its flags where they are valid, else its kind and version alone; None where no engine
    recognised it."""
    if service.engine is None:
        return None
    try:
        return service_spec(service, service.version, None)
    except BadInputError:
        return spec_of(service.engine, {}, version=service.version)


def _verdict(service: ComposeService, result: CheckResult, rank: int | None) -> ServiceVerdict:
    return ServiceVerdict(service.name, result.verdict.verdict, result, rank=rank)


def _unknown(
    service: ComposeService, snapshots: Sequence[Snapshot], host: str | None
) -> ServiceVerdict:
    """A GPU service with no known need: the cards it asks for, and why they may be wrong."""
    message = unknown_message(service)
    warnings: list[str] = []
    try:
        snapshot = pick_snapshot(snapshots, host)
        try:
            # An engine that says its card count takes that many (SGLang: one with no --tp),
            # whatever its container sees; a service no engine recognised, every card.
            every = service.engine is None or service.unknown is not None
            cards = resolve_cards(service, snapshot.host, snapshot.cards, every=every)
        except ComposeError as exc:
            if service.visible is None:
                raise
            # CUDA_VISIBLE_DEVICES names a card the container lacks: its cards are still the
            # container's; the process inside would fail to find the one it names.
            cards = resolve_cards(
                replace(service, visible=None), snapshot.host, snapshot.cards, every=every
            )
            warnings.append(
                f"service {service.name}: {exc.argument or 'CUDA_VISIBLE_DEVICES'} names a card "
                f"its container lacks: {exc.msg}"
            )
    except BadInputError as exc:
        reason = exc.msg if isinstance(exc, ComposeError) else str(exc)
        return ServiceVerdict(
            service.name,
            "unknown",
            message=f"{message}; its cards cannot be told either: {reason}",
            engine=_engine_of(service),
        )
    return ServiceVerdict(
        service.name,
        "unknown",
        message=f"{message}; it asks for card(s) {', '.join(map(str, cards))} of {snapshot.host}",
        cards=(snapshot.host, cards),
        warnings=tuple(warnings),
        engine=_engine_of(service),
    )


def replica_seat(seat: Seat, replica: int, rank: int | None = None) -> Seat:
    """Replica 0 is the seat itself (a redeploy frees its running bytes); others get `#i`, and a
    data-parallel engine after the first `#dpN`."""
    name = seat.name + (f"#dp{rank}" if rank else "") + (f"#{replica}" if replica else "")
    return seat if name == seat.name else seat.model_copy(update={"name": name})


def _stopped(catalogue: Catalogue, snapshot: Snapshot, names: set[str]) -> dict[CardKey, CardModel]:
    """The models of `snapshot`'s cards with the seats `names` taken off where they run: the
    whole stack is redeployed, so their processes stop too. Each one's place is then its new
    need, counted among the deploy's other seats, never its old bytes beside it."""
    models: dict[CardKey, CardModel] = {}
    for card in snapshot.cards:
        model = card_model(catalogue, snapshot.host, card)
        for name in sorted(names & model.seen_bytes.keys()):
            model = model.without_seat(name)
        models[model.key] = model
    return models


def _together(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    judged: Sequence[tuple[ServiceVerdict, int]],
    replicas: dict[str, int],
) -> tuple[ServiceVerdict, ...]:
    """Each judged seat again, started last beside every other seat of the deploy (plan's rules).

    An unknown or bad service has no need to count: its neighbours are judged without it.
    """
    placements: list[tuple[ServiceVerdict, int, Placement]] = []
    for verdict, replica in judged:
        if verdict.result is None or verdict.settled:
            continue
        result = verdict.result
        seat = replica_seat(result.seat, replica, verdict.rank)
        placements.append(
            (verdict, replica, Placement(seat, result.snapshot.host, result.verdict.cards))
        )
    out: list[ServiceVerdict] = []
    for verdict, replica in judged:
        if verdict.result is None or verdict.settled:
            out.append(verdict)
            continue
        mine = next(p for v, r, p in placements if v is verdict and r == replica)
        others = [p for _, _, p in placements if p is not mine]
        result = verdict.result
        # The whole stack is redeployed: the running processes of its other seats stop too.
        snapshot = result.snapshot
        models = _stopped(catalogue, snapshot, {p.seat.name for p in others} - {mine.seat.name})
        joint = judge(
            catalogue,
            snapshot,
            mine.seat,
            mine.cards,
            others=others,
            mode="check",
            need_floor=not result.resident_known,
            models=models,
        )
        joint = replace(
            joint, warnings=tuple(dict.fromkeys([*result.verdict.warnings, *joint.warnings]))
        )
        if verdict.undecided is not None and not decided(joint, mine.seat):
            out.append(verdict.undecided)
            continue
        shown = replica if replicas.get(verdict.service, 1) > 1 else None
        # Where it is refused: other cards that take it beside the rest of the deploy.
        seen = [snapshot if s.host == snapshot.host else s for s in snapshots]
        mine_result = with_nearest(
            catalogue, seen, replace(result, verdict=joint, seat=mine.seat), others, models
        )
        out.append(
            ServiceVerdict(
                verdict.service, joint.verdict, mine_result, replica=shown, rank=verdict.rank
            )
        )
    return tuple(out)
