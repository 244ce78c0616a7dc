"""`gpuplan check`: the pre-deploy refusal check, for a catalogue seat or every vLLM service of a compose file.

Exit 0 pass, 1 refuse, 2 bad input, 3 cannot decide — so `gpuplan check … && docker compose up -d` is safe.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from placement.cli.check_window import add_window_arguments, validate_window, windowed
from placement.cli.notes_text import note_texts
from placement.cli.reasons_text import reason_text, worded_json, worded_verdict
from placement.cli.sources import (
    DEFAULT_MAX_AGE,
    Cards,
    add_catalogue_argument,
    add_source_arguments,
    check_age,
    load_add_files,
    load_catalogue_argument,
    parse_age,
    resolve_snapshots,
    source_options,
    utc_now,
)
from seats.errors import BadInputError, CannotDecideError, Exit

if TYPE_CHECKING:
    from inventory.holds import Hold
    from inventory.ledger.store import Approval
    from inventory.snapshot import Snapshot
    from placement.check.deploy import DeployResult
    from placement.check.seat import CheckResult
    from seats.model import Catalogue

HELP = "will this seat start on these cards? (pre-deploy check; exit 0 pass, 1 refuse)"
DESCRIPTION = (
    "Judge one seat on given cards before it starts: room beside its neighbours, vLLM's own "
    "start-up gate, held reserves, unbounded vLLM on a shared card, the margin. Either a seat "
    "of the catalogue (SEAT --gpu N) or every vLLM service of a docker compose file "
    "(--compose FILE). Exit 0 pass, 1 refuse, 2 bad input, 3 cannot decide."
)


def _cards(text: str) -> tuple[int, ...]:
    try:
        cards = tuple(int(part) for part in text.split(",") if part.strip() != "")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"cannot read {text!r} as cards; write e.g. 0 or 0,1"
        ) from None
    if not cards or any(card < 0 for card in cards):
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as cards; write e.g. 0 or 0,1")
    return cards


def _util(text: str) -> Decimal:
    # The engines' reader of a util request (a seat check never imports the compose reader).
    from placement.fit.engines.base import parse_util

    try:
        return Decimal(parse_util(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _bytes(allow_zero: bool) -> Callable[[str], int]:
    def parse(text: str) -> int:
        from seats.units import ByteSizeError, parse_bytes

        try:
            return parse_bytes(text, allow_zero=allow_zero)
        except ByteSizeError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SEAT --gpu N[,M] [--util U] [--kv-cache-memory B] [--resident B] | --compose FILE [--service S]."""
    parser.add_argument("seat", nargs="?", metavar="SEAT", help="a seat of the catalogue")
    parser.add_argument(
        "--gpu",
        type=_cards,
        metavar="N[,M]",
        help="the cards to start it on (default: the catalogue's card list)",
    )
    parser.add_argument(
        "--util",
        type=_util,
        metavar="U",
        help="--gpu-memory-utilization to judge (overrides the catalogue)",
    )
    parser.add_argument(
        "--kv-cache-memory",
        dest="kv_cache_bytes",
        type=_bytes(False),
        metavar="B",
        help="--kv-cache-memory-bytes to judge, e.g. '2 GiB' (overrides the catalogue)",
    )
    parser.add_argument(
        "--resident",
        dest="resident_bytes",
        type=_bytes(False),
        metavar="B",
        help="bytes the seat holds per card once up, e.g. '10740 MiB' (overrides the catalogue)",
    )
    parser.add_argument(
        "--compose",
        action="append",
        metavar="FILE",
        help="check every GPU service of this docker compose file, with the override file "
        "`docker compose up -d` merges beside it; repeated, the files are merged in order and "
        "alone (as `docker compose -f A -f B`)",
    )
    parser.add_argument(
        "--service",
        metavar="S",
        help="with --compose: check S and the services it depends_on (what `up -d S` starts)",
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="P",
        help="with --compose: include the services of profile P (repeatable)",
    )
    parser.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="SEAT.yaml",
        help="judge a seat not in the catalogue yet (as plan --add); with --compose, "
        "`x-gpuplan-seat` may name it (repeatable)",
    )
    parser.add_argument("--host", metavar="H", help="the host, where the snapshots cover several")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument(
        "--hold-for",
        type=parse_age,
        default=timedelta(minutes=30),
        metavar="AGE",
        help="with --ledger: a pass holds its bytes on its cards this long, or until the seat is "
        "seen there (default 30m)",
    )
    parser.add_argument(
        "--no-hold", action="store_true", help="with --ledger: record the decision only"
    )
    add_window_arguments(parser)
    add_catalogue_argument(parser)
    add_source_arguments(parser)


def _validate(args: argparse.Namespace) -> None:
    validate_window(args)
    if (
        args.compose is None
        and args.seat is None
        and not args.add
        and args.ledger
        and not os.path.exists(args.ledger)
    ):
        raise BadInputError(
            f"--ledger took {args.ledger!r} as its file (there is none) and no seat is named: "
            f"put the seat first (gpuplan check {args.ledger} --gpu N --ledger [DB])"
        )
    if args.compose is None and args.seat is None and not args.add:
        raise BadInputError(
            "name a seat (gpuplan check SEAT --gpu N) or a compose file (--compose FILE)"
        )
    if args.compose is not None:
        if args.seat is not None:
            raise BadInputError("give a seat or --compose FILE, not both")
        given = [
            flag
            for flag, value in (
                ("--gpu", args.gpu),
                ("--util", args.util),
                ("--kv-cache-memory", args.kv_cache_bytes),
                ("--resident", args.resident_bytes),
            )
            if value is not None
        ]
        if given:
            raise BadInputError(
                f"{', '.join(given)} apply to a catalogue seat; with --compose the file's own flags are judged"
            )
    elif args.service is not None or args.profile:
        raise BadInputError(f"{'--service' if args.service else '--profile'} needs --compose FILE")


def _cards_to_judge(args: argparse.Namespace, catalogue: Catalogue, now: datetime) -> Cards:
    """The snapshots to judge on. From a ledger, staleness is checked per snapshot used, later."""
    source = source_options(args)
    if source.snapshots or source.live or source.prometheus:
        source = replace(source, ledger=None)  # its holds are read inside the approval
    elif source.ledger:
        source = replace(source, max_age=timedelta.max)
    host = _checked_host(args, catalogue)
    return resolve_snapshots(
        source, catalogue, now, needed_host=host, every_host_needed=host is None
    )


def _checked_host(args: argparse.Namespace, catalogue: Catalogue) -> str | None:
    """The host whose cards are judged: --host, else the catalogue seat's; None when unknown."""
    if args.host:
        return str(args.host)
    if args.seat is not None:
        seat = next((s for s in catalogue.seats if s.name == args.seat), None)
        if seat is not None and seat.host is not None:
            return seat.host
    return None


def run(args: argparse.Namespace) -> int:
    """Judge, print, record in the ledger (with holds) when one is given; exit with the worst verdict."""
    from placement.fit.consistency import check_snapshots

    _validate(args)
    now = utc_now()
    catalogue = _with_added(args, load_catalogue_argument(args))
    _known_host(args, catalogue)
    cards = _cards_to_judge(args, catalogue, now)
    # Card count vs the catalogue is bad input; a host the catalogue lacks only warns.
    origins = [cards.origin(s.host) for s in cards.snapshots]
    for warning in note_texts(check_snapshots(catalogue, cards.snapshots, origins)):
        print(f"warning: {warning}", file=sys.stderr)
    unknown = _unknown_seat(args, catalogue, cards)
    if unknown is not None:
        return unknown
    judge = (
        _compose_judge(args, catalogue)
        if args.compose is not None
        else _seat_judge(args, catalogue)
    )
    if args.window is not None:
        judge = windowed(args, catalogue, judge)
    if args.ledger:
        outcome = _judge_and_hold(args, catalogue, cards, judge, now)
    else:
        outcome = judge(cards.snapshots)
        _print(args, cards, outcome)
    return int(outcome.exit_code)


def _print(args: argparse.Namespace, cards: Cards, outcome: CheckOutcome) -> None:
    if not args.json:
        for line in cards.hosts_lines():
            print(line)
    outcome.show(args.json, cards)


def _unknown_seat(args: argparse.Namespace, catalogue: Catalogue, cards: Cards) -> int | None:
    """A catalogue seat whose every host is unusable cannot be judged: verdict `unknown`, exit 3."""
    seat = next((s for s in catalogue.seats if s.name == args.seat), None)
    if seat is None or not cards.unusable:
        return None
    from placement.plan.unusable import unknown_verdict

    if args.host is not None:
        seat = seat.model_copy(update={"host": args.host})
    verdict = unknown_verdict(catalogue, seat, {h: u.reason for h, u in cards.unusable.items()})
    if verdict is None:
        return None
    if args.json:
        print(
            json.dumps(
                worded_json({"schema": 1, **verdict.to_json(), **cards.hosts_json()}), indent=2
            )
        )
    else:
        for line in cards.hosts_lines():
            print(line)
        print(f"UNKNOWN  {seat.name}: {reason_text(verdict.reasons[0])}")
    return int(Exit.CANNOT_DECIDE)


def _with_added(args: argparse.Namespace, catalogue: Catalogue) -> Catalogue:
    """The catalogue with the --add files' seats in it (checked as plan checks them); picks SEAT.

    With no SEAT and no --compose, the --add files must hold one seat: it is the one judged.
    """
    if not args.add:
        return catalogue
    from placement.plan.problem import new_seats

    adds = load_add_files(args.add)
    added = tuple(new.seat for new in new_seats(catalogue, adds) if new.origin != "catalogue")
    if args.compose is None and args.seat is None:
        if len(added) != 1:
            names = ", ".join(seat.name for seat in added)
            raise BadInputError(f"--add gives {len(added)} seats ({names}): name the one to check")
        args.seat = added[0].name
    return catalogue.model_copy(update={"seats": (*catalogue.seats, *added)})


def _known_host(args: argparse.Namespace, catalogue: Catalogue) -> None:
    """--host names a host of the catalogue (DESIGN.md "Fleets"), or says which it might mean."""
    from placement.check.seat import did_you_mean

    if args.host is not None and args.host not in catalogue.hosts:
        hosts = list(catalogue.hosts)
        raise BadInputError(
            f"--host {args.host}: not a host of the catalogue{did_you_mean(args.host, hosts)} "
            f"(hosts: {', '.join(hosts)})"
        )


@dataclass(frozen=True)
class CheckOutcome:
    """What a check judged: its results (one per seat), its exit, and how it prints itself."""

    results: list[CheckResult]
    exit_code: int
    show: Callable[[bool, Cards], None]
    deploy: DeployResult | None = None  # `check --compose`: the deploy (--window judges it again)


Judge = Callable[[Sequence["Snapshot"]], CheckOutcome]


def _seat_judge(args: argparse.Namespace, catalogue: Catalogue) -> Judge:
    """`check SEAT --gpu N`: one verdict; a refusal names the nearest other cards that take it."""
    from placement.check.nearest import with_nearest
    from placement.check.seat import check_seat, result_json
    from placement.cli.check_text import render

    def judge(snapshots: Sequence[Snapshot]) -> CheckOutcome:
        result = check_seat(
            catalogue,
            snapshots,
            args.seat,
            args.gpu,
            host=args.host,
            util=args.util,
            kv_cache_bytes=args.kv_cache_bytes,
            resident_bytes=args.resident_bytes,
        )
        result = with_nearest(catalogue, snapshots, result)

        def show(as_json: bool, cards: Cards) -> None:
            if as_json:
                print(
                    json.dumps(worded_json({**result_json(result), **cards.hosts_json()}), indent=2)
                )
            else:
                print(render(result, cards.origin(result.snapshot.host)))

        return CheckOutcome([result], int(result.exit_code), show)

    return judge


def _compose_judge(args: argparse.Namespace, catalogue: Catalogue) -> Judge:
    """`check --compose FILE`: the whole deploy, one verdict per service (and replica)."""
    from placement.check.compose import load_compose
    from placement.check.deploy import judge_deploy
    from placement.cli.check_text import render_deploy

    files = args.compose[0] if len(args.compose) == 1 else args.compose
    compose = load_compose(files, dict(os.environ), service=args.service, profiles=args.profile)

    def judge(snapshots: Sequence[Snapshot]) -> CheckOutcome:
        deploy = judge_deploy(catalogue, snapshots, compose, host=args.host)

        def show(as_json: bool, cards: Cards) -> None:
            for verdict in deploy.verdicts:
                if verdict.kind == "error":
                    print(f"error: {verdict.message}", file=sys.stderr)
            if as_json:
                print(json.dumps(worded_json({**deploy.to_json(), **cards.hosts_json()}), indent=2))
            else:
                print(render_deploy(deploy, cards.origin))

        return CheckOutcome(deploy.results, int(deploy.exit_code), show, deploy)

    return judge


def _judge_and_hold(
    args: argparse.Namespace, catalogue: Catalogue, cards: Cards, judge: Judge, now: datetime
) -> CheckOutcome:
    """Read the holds, judge beside them, print, record the decisions and, on a pass, hold: one
    transaction.

    Two checks on one ledger are judged one after the other, so they never both take the same
    free bytes. A ledger snapshot past --max-age decides nothing: recorded `unknown`, exit 3.
    The verdict is printed and flushed before the transaction commits: one that could not be
    delivered (stdout closed or full) rolls it back, so no one holds bytes for a verdict nobody
    saw (DESIGN.md "Never yes by accident"). A verdict is a few KiB, under a pipe's buffer, so
    a slow reader does not keep the lock.
    """
    from inventory.ledger.store import open_ledger
    from inventory.snapshot import with_holds
    from placement.cli.output import deliver

    stale: str | None = None
    with open_ledger(args.ledger) as ledger, ledger.approving(now) as approval:
        snapshots = _inside(catalogue, cards, approval, now)
        outcome = judge(with_holds(snapshots, approval.holds))
        stale = _stale(args, cards, outcome.results, now)
        ids = _record(approval, outcome.results, now, stale=stale)
        if stale is None and outcome.exit_code == 0 and not args.no_hold:
            approval.hold(_holds(outcome.results, ids, now, args.hold_for))
        if stale is None:
            _print(args, cards, outcome)
            deliver("the verdict and its hold were not recorded")
    if stale is not None:
        raise CannotDecideError(stale)
    return outcome


def _inside(
    catalogue: Catalogue, cards: Cards, approval: Approval, now: datetime
) -> list[Snapshot]:
    """The snapshots to judge on, as the write transaction sees them.

    Cards read from the ledger are read again under the lock: a snapshot stored while this
    check waited may show an approved seat started, which ends its hold; judged on the older
    snapshot, those bytes would look free twice (DESIGN.md "Never yes by accident").
    """
    from placement.cli.sources import consistent
    from placement.fit.consistency import check_snapshots

    out: list[Snapshot] = []
    for snapshot in cards.snapshots:
        origin = cards.origin(snapshot.host)
        if not origin.startswith("ledger"):
            out.append(snapshot)
            continue
        newest = approval.latest(snapshot.host)
        if newest is None or newest.taken_at == snapshot.taken_at:
            out.append(snapshot)
            continue
        consistent(newest, f"{origin}: host {newest.host}", now)
        out.append(newest)
    if out != list(cards.snapshots):
        origins = [cards.origin(s.host) for s in out]
        for warning in note_texts(check_snapshots(catalogue, out, origins)):
            print(f"warning: {warning}", file=sys.stderr)
    return out


def _stale(
    args: argparse.Namespace, cards: Cards, results: list[CheckResult], now: datetime
) -> str | None:
    """Why a ledger snapshot is too old to decide on (default 15 min), or None."""
    for result in results:
        origin = cards.origin(result.snapshot.host)
        if not origin.startswith("ledger"):
            continue
        try:
            check_age(result.snapshot, now, args.max_age or DEFAULT_MAX_AGE, origin)
        except CannotDecideError as exc:
            return str(exc)
    return None


def _holds(
    results: list[CheckResult], ids: list[int], now: datetime, hold_for: timedelta
) -> list[Hold]:
    """One hold per passed seat: its need and gate request on each of its cards, until `hold_for`."""
    from inventory.holds import Hold

    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "unknown"
    return [
        Hold(
            seat=result.verdict.seat,
            host=result.snapshot.host,
            cards=tuple(result.verdict.cards),
            need_bytes=result.verdict.need_bytes or 0,
            requested_bytes=max(
                (f.requested_bytes or 0 for f in result.verdict.figures), default=0
            ),
            created_at=now,
            expires_at=now + hold_for,
            user=user,
            decision_id=decision_id,
        )
        for result, decision_id in zip(results, ids, strict=True)
        if result.verdict.passed and result.verdict.need_bytes
    ]


def _record(
    approval: Approval, results: list[CheckResult], now: datetime, *, stale: str | None = None
) -> list[int]:
    """Append each verdict to the ledger's decisions, for the weekly report; their ids.

    `stale`: the snapshot was too old to decide on; each verdict is recorded as unknown, with
    the reason as an `error` rule.
    """
    from placement.check.seat import inputs_digest
    from placement.decisions import Decision, record_decisions
    from placement.fit.verdict import Reason

    decisions = []
    for result in results:
        host = result.snapshot.host
        verdict = result.verdict
        if stale is not None:
            error = Reason("error", None, None, None, None, stale, host)
            verdict = replace(verdict, verdict="unknown", reasons=(error,))
        # Recorded without its holds: a snapshot is what was measured, nothing else.
        decisions.append(
            Decision(worded_verdict(verdict), inputs_digest(result), result.snapshot, host)
        )
    return record_decisions(approval, "check", decisions, now)
