"""`gpuplan check`: the pre-deploy refusal check, for a catalogue seat or every vLLM service of a compose file.

Exit 0 pass, 1 refuse, 2 bad input, 3 cannot decide — so `gpuplan check … && docker compose up -d` is safe.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from placement.cli.sources import (
    DEFAULT_MAX_AGE,
    add_catalogue_argument,
    add_source_arguments,
    check_age,
    load_catalogue_argument,
    resolve_snapshots,
    utc_now,
)
from seats.errors import BadInputError, CannotDecideError

if TYPE_CHECKING:
    from inventory.snapshot import Snapshot
    from placement.check.seat import CheckResult

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
    parser.add_argument("--service", metavar="S", help="with --compose: check this service only")
    parser.add_argument("--host", metavar="H", help="the host, where the snapshots cover several")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    add_catalogue_argument(parser)
    add_source_arguments(parser)


def _validate(args: argparse.Namespace) -> None:
    if args.compose is None and args.seat is None:
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
    elif args.service is not None:
        raise BadInputError("--service needs --compose FILE")


def _source(args: argparse.Namespace) -> str:
    if getattr(args, "live", False):
        return "NVML, live"
    if getattr(args, "ledger", None):
        return f"ledger {args.ledger}"
    if getattr(args, "prometheus", None):
        return f"Prometheus {args.prometheus}"
    return str(args.snapshot)


def _snapshots(args: argparse.Namespace, catalogue: object, now: datetime) -> list[Snapshot]:
    """The snapshots to judge on. From a ledger, staleness is checked per snapshot used, later."""
    if not getattr(args, "ledger", None):
        return resolve_snapshots(args, catalogue, now)  # type: ignore[arg-type]
    relaxed = argparse.Namespace(**{**vars(args), "max_age": timedelta.max})
    return resolve_snapshots(relaxed, catalogue, now)  # type: ignore[arg-type]


def run(args: argparse.Namespace) -> int:
    """Judge, print, record in the ledger when one is given; exit with the worst verdict."""
    from placement.check.compose import load_compose
    from placement.check.seat import (
        check_seat,
        check_service,
        render,
        result_json,
        results_json,
        worst_exit,
    )

    _validate(args)
    now = utc_now()
    catalogue = load_catalogue_argument(args)
    snapshots = _snapshots(args, catalogue, now)
    # Card count vs the catalogue is bad input; a host the catalogue lacks only warns.
    from placement.plan.problem import check_snapshots

    for warning in check_snapshots(catalogue, snapshots, [_source(args)] * len(snapshots)):
        print(f"warning: {warning}", file=sys.stderr)
    results: list[CheckResult]
    skipped: tuple[str, ...] = ()
    if args.compose is not None:
        compose = load_compose(args.compose, dict(os.environ), service=args.service)
        if not compose.services:
            raise BadInputError(
                f"{args.compose}: no service runs vLLM (services: {', '.join(compose.skipped)})"
            )
        skipped = compose.skipped
        results = [
            check_service(catalogue, snapshots, service, host=args.host)
            for service in compose.services
        ]
    else:
        results = [
            check_seat(
                catalogue,
                snapshots,
                args.seat,
                args.gpu,
                host=args.host,
                util=args.util,
                kv_cache_bytes=args.kv_cache_bytes,
                resident_bytes=args.resident_bytes,
            )
        ]
    if getattr(args, "ledger", None):
        _ledger_staleness(args, results, now)
        _record(args.ledger, results, now)
    if args.json:
        if args.compose is not None:
            print(json.dumps(results_json(results, args.compose), indent=2))
        else:
            print(json.dumps(result_json(results[0]), indent=2))
    else:
        source = _source(args)
        print("\n\n".join(render(result, source) for result in results))
        if args.compose is not None:
            worst = {0: "pass", 1: "refuse", 3: "unknown"}[int(worst_exit(results))]
            tail = f"; not vLLM, not checked: {', '.join(skipped)}" if skipped else ""
            print(f"\n{args.compose}: {len(results)} vLLM service(s), worst verdict {worst}{tail}")
    return int(worst_exit(results))


def _ledger_staleness(args: argparse.Namespace, results: list[CheckResult], now: datetime) -> None:
    """A ledger snapshot past --max-age (default 15 min) decides nothing: record 'unknown', exit 3."""
    for result in results:
        try:
            check_age(
                result.snapshot, now, args.max_age or DEFAULT_MAX_AGE, f"ledger {args.ledger}"
            )
        except CannotDecideError as exc:
            _record(args.ledger, results, now, stale=str(exc))
            raise


def _record(
    path: str, results: list[CheckResult], now: datetime, *, stale: str | None = None
) -> None:
    """Append each verdict to the ledger's decisions, for the weekly report."""
    from inventory.ledger.store import open_ledger
    from placement.check.seat import inputs_digest

    with open_ledger(path) as ledger:
        for result in results:
            snapshot_id = ledger.append(result.snapshot)
            if stale is not None:
                verdict = "unknown"
                reasons = [
                    {
                        "rule": "error",
                        "host": result.snapshot.host,
                        "card": None,
                        "need_bytes": None,
                        "room_bytes": None,
                        "short_bytes": None,
                        "text": stale,
                    }
                ]
            else:
                verdict = result.verdict.verdict
                reasons = [reason.to_json() for reason in result.verdict.reasons]
            ledger.record_decision(
                kind="check",
                host=result.snapshot.host,
                seat=result.verdict.seat,
                cards=list(result.verdict.cards),
                verdict=verdict,
                reasons=reasons,
                inputs_digest=inputs_digest(result),
                snapshot_id=snapshot_id,
                decided_at=now,
            )
