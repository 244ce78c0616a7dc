"""`gpuplan check`: the pre-deploy refusal check, for a catalogue seat or every vLLM service of a compose file.

Exit 0 pass, 1 refuse, 2 bad input, 3 cannot decide — so `gpuplan check … && docker compose up -d` is safe.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from placement.cli.sources import (
    DEFAULT_MAX_AGE,
    Cards,
    add_catalogue_argument,
    add_source_arguments,
    check_age,
    load_catalogue_argument,
    resolve_snapshots,
    source_options,
    utc_now,
)
from seats.errors import BadInputError, CannotDecideError

if TYPE_CHECKING:
    from placement.check.outside import CheckResult
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
    from placement.check.compose import parse_util

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
        "--compose", metavar="FILE", help="check every vLLM service of this docker compose file"
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
    add_catalogue_argument(parser)
    add_source_arguments(parser)


def _validate(args: argparse.Namespace) -> None:
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
    if source.ledger:
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
    """Judge, print, record in the ledger when one is given; exit with the worst verdict."""
    from placement.check.outside import check_snapshots

    _validate(args)
    now = utc_now()
    catalogue = _with_added(args, load_catalogue_argument(args))
    _known_host(args, catalogue)
    cards = _cards_to_judge(args, catalogue, now)
    # Card count vs the catalogue is bad input; a host the catalogue lacks only warns.
    origins = [cards.origin(s.host) for s in cards.snapshots]
    for warning in check_snapshots(catalogue, cards.snapshots, origins):
        print(f"warning: {warning}", file=sys.stderr)
    if args.compose is not None:
        return _run_compose(args, catalogue, cards, now)
    return _run_seat(args, catalogue, cards, now)


def _with_added(args: argparse.Namespace, catalogue: Catalogue) -> Catalogue:
    """The catalogue with the --add files' seats in it (checked as plan checks them); picks SEAT.

    With no SEAT and no --compose, the --add files must hold one seat: it is the one judged.
    """
    if not args.add:
        return catalogue
    from placement.check.outside import load_add_file, new_seats

    adds = [(path, seat) for path in args.add for seat in load_add_file(path)]
    added = tuple(new.seat for new in new_seats(catalogue, adds) if new.origin != "catalogue")
    if args.compose is None and args.seat is None:
        if len(added) != 1:
            names = ", ".join(seat.name for seat in added)
            raise BadInputError(f"--add gives {len(added)} seats ({names}): name the one to check")
        args.seat = added[0].name
    return catalogue.model_copy(update={"seats": (*catalogue.seats, *added)})


def _known_host(args: argparse.Namespace, catalogue: Catalogue) -> None:
    """--host names a host of the catalogue (DESIGN.md "Fleets"), or says which it might mean."""
    from placement.check.outside import did_you_mean

    if args.host is not None and args.host not in catalogue.hosts:
        hosts = list(catalogue.hosts)
        raise BadInputError(
            f"--host {args.host}: not a host of the catalogue{did_you_mean(args.host, hosts)} "
            f"(hosts: {', '.join(hosts)})"
        )


def _run_seat(args: argparse.Namespace, catalogue: Catalogue, cards: Cards, now: datetime) -> int:
    """`check SEAT --gpu N`: one verdict; a refusal names the nearest other cards that take it."""
    from placement.check.nearest import with_nearest
    from placement.check.outside import check_seat, result_json
    from placement.cli.check_text import render

    result = check_seat(
        catalogue,
        cards.snapshots,
        args.seat,
        args.gpu,
        host=args.host,
        util=args.util,
        kv_cache_bytes=args.kv_cache_bytes,
        resident_bytes=args.resident_bytes,
    )
    result = with_nearest(catalogue, cards.snapshots, result)
    _ledger(args, [result], now)
    if args.json:
        print(json.dumps(result_json(result), indent=2))
    else:
        print(render(result, cards.origin(result.snapshot.host)))
    return int(result.exit_code)


def _run_compose(
    args: argparse.Namespace, catalogue: Catalogue, cards: Cards, now: datetime
) -> int:
    """`check --compose FILE`: the whole deploy, one verdict per service (and replica)."""
    from placement.check.compose import load_compose
    from placement.check.deploy import judge_deploy
    from placement.cli.check_text import render_deploy

    compose = load_compose(
        args.compose, dict(os.environ), service=args.service, profiles=args.profile
    )
    deploy = judge_deploy(catalogue, cards.snapshots, compose, host=args.host)
    _ledger(args, deploy.results, now)
    for verdict in deploy.verdicts:
        if verdict.kind == "error":
            print(f"error: {verdict.message}", file=sys.stderr)
    if args.json:
        print(json.dumps(deploy.to_json(), indent=2))
    else:
        print(render_deploy(deploy, cards.origin))
    return int(deploy.exit_code)


def _ledger(args: argparse.Namespace, results: list[CheckResult], now: datetime) -> None:
    if args.ledger and results:
        _ledger_staleness(args.ledger, args.max_age, results, now)
        _record(args.ledger, results, now)


def _ledger_staleness(
    path: str, max_age: timedelta | None, results: list[CheckResult], now: datetime
) -> None:
    """A ledger snapshot past --max-age (default 15 min) decides nothing: record 'unknown', exit 3."""
    for result in results:
        try:
            check_age(result.snapshot, now, max_age or DEFAULT_MAX_AGE, f"ledger {path}")
        except CannotDecideError as exc:
            _record(path, results, now, stale=str(exc))
            raise


def _record(
    path: str, results: list[CheckResult], now: datetime, *, stale: str | None = None
) -> None:
    """Append each verdict to the ledger's decisions, for the weekly report.

    `stale`: the snapshot was too old to decide on; each verdict is recorded as unknown, with
    the reason as an `error` rule.
    """
    from inventory.ledger.store import open_ledger
    from placement.check.outside import Reason, inputs_digest
    from placement.decisions import Decision, record_decisions

    decisions = []
    for result in results:
        host = result.snapshot.host
        verdict = result.verdict
        if stale is not None:
            error = Reason("error", None, None, None, None, stale, host)
            verdict = replace(verdict, verdict="unknown", reasons=(error,))
        decisions.append(Decision(verdict, inputs_digest(result), result.snapshot, host))
    with open_ledger(path) as ledger:
        record_decisions(ledger, "check", decisions, now)
