"""`check --window D` and its flags: read them, judge every moment of the window after the check
at its end, and print the window (its first line names it) beside the verdicts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from placement.cli.sources import parse_age
from seats.errors import BadInputError

if TYPE_CHECKING:
    from inventory.snapshot import Snapshot
    from placement.check.window import WindowedResult
    from placement.cli.sources import Cards
    from placement.fit.week.windowed import WindowOptions
    from seats.model import Catalogue

# The most a window may reach back (DESIGN.md "The week").
MAX_WINDOW = timedelta(days=31)
# placement.cli.check's CheckOutcome (not imported: that module imports this one).
Outcome = Any
_FAMILY = ("percentile", "min_history", "min_coverage", "horizon", "restart_safe", "no_rebase")


def _window(text: str) -> timedelta:
    length = parse_age(text)
    if length <= timedelta(0) or length > MAX_WINDOW:
        raise argparse.ArgumentTypeError(f"--window {text}: from 1s to 31d, e.g. 36h or 7d")
    return length


def _percentile(text: str) -> Decimal:
    try:
        value = Decimal(text.strip().removeprefix("p"))
    except InvalidOperation:
        raise argparse.ArgumentTypeError(
            f"cannot read {text!r} as a percentile, e.g. 99.5"
        ) from None
    if not value.is_finite() or not 0 < value <= 100 or value != value.quantize(Decimal("0.01")):
        raise argparse.ArgumentTypeError(
            f"--percentile {text}: in (0, 100] with at most two decimals, e.g. 99.5"
        )
    return value


def _coverage(text: str) -> Decimal:
    try:
        value = Decimal(text.strip().removesuffix("%"))
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a coverage, e.g. 90%") from None
    if not value.is_finite() or not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"--min-coverage {text}: from 0% to 100%")
    return value / 100


def _days(text: str) -> Decimal:
    return Decimal(parse_age(text).total_seconds()) / 86_400


def add_window_arguments(parser: argparse.ArgumentParser) -> None:
    """--window D and the flags that tune it (DESIGN.md "The week")."""
    parser.add_argument(
        "--window",
        type=_window,
        metavar="D",
        help="judge against every stored moment of the last D (36h, 7d; at most 31d) of the "
        "history (--ledger or --prometheus), not only its newest snapshot",
    )
    parser.add_argument(
        "--percentile",
        type=_percentile,
        metavar="P",
        help="with --window: pass when short moments are at most (100 − P)%% of those seen "
        "(default 100: none)",
    )
    parser.add_argument(
        "--min-history",
        type=parse_age,
        metavar="AGE",
        help="with --window: less history is `unknown`, and a seat seen less since its last "
        "change is cold (default 24h)",
    )
    parser.add_argument(
        "--min-coverage",
        type=_coverage,
        metavar="PCT",
        help="with --window: less of the window seen is `unknown` (default 90%%)",
    )
    parser.add_argument(
        "--horizon",
        type=_days,
        metavar="D",
        help="with --window: refuse when a card's trend runs out within D (e.g. 14d)",
    )
    parser.add_argument(
        "--restart-safe",
        action="store_true",
        default=None,
        help="with --window: refuse when a request-gated seat could not restart (default: warn)",
    )
    parser.add_argument(
        "--no-rebase",
        action="store_true",
        default=None,
        help="with --window: count a seat as observed before its last change of command line",
    )


def validate_window(args: argparse.Namespace) -> None:
    """The window's flags need --window; --window needs a history (--ledger or --prometheus)."""
    given = [f"--{name.replace('_', '-')}" for name in _FAMILY if getattr(args, name) is not None]
    if args.window is None:
        if given:
            raise BadInputError(f"{', '.join(given)} need --window D")
        return
    if args.snapshot or args.live:
        raise BadInputError(
            f"--window needs --ledger or --prometheus (a history); {'--snapshot' if args.snapshot else '--live'} "
            "gives one moment"
        )
    if not args.ledger and not args.prometheus:
        raise BadInputError(
            "--window needs --ledger DB or --prometheus URL (the history it judges against)"
        )


def options_of(args: argparse.Namespace) -> WindowOptions:
    from placement.fit.week.windowed import WindowOptions

    return WindowOptions(
        length=args.window,
        percentile=args.percentile if args.percentile is not None else Decimal(100),
        min_history=args.min_history if args.min_history is not None else timedelta(hours=24),
        min_coverage=args.min_coverage if args.min_coverage is not None else Decimal("0.9"),
        horizon_days=args.horizon,
        restart_safe=bool(args.restart_safe),
        rebase=not args.no_rebase,
    )


def windowed(
    args: argparse.Namespace,
    catalogue: Catalogue,
    judge: Callable[[Sequence[Snapshot]], Outcome],
) -> Callable[[Sequence[Snapshot]], Outcome]:
    """`judge` followed by the window's replay of each verdict's host; prints both."""
    from placement.check.window import judge_window
    from placement.cli.history_source import open_history, with_unknowns
    from placement.cli.sources import source_options

    options = options_of(args)

    def judge_over(snapshots: Sequence[Snapshot]) -> Outcome:
        outcome = judge(snapshots)
        with open_history(source_options(args)) as history:
            found = [
                replace(item, window=with_unknowns(history, item.window))
                for item in judge_window(catalogue, history, outcome.results, options)
            ]
        results = [w.result for w in found]
        exit_code = max([outcome.exit_code, *(int(r.exit_code) for r in results)])

        def show(as_json: bool, cards: Cards) -> None:
            if args.compose is not None:
                _show_deploy(args, as_json, cards, outcome, found)
            else:
                _show_seat(as_json, cards, outcome, found)

        return replace(outcome, results=results or outcome.results, exit_code=exit_code, show=show)

    return judge_over


def _with_words(item: WindowedResult) -> Any:
    """The result with the window's warnings in its verdict's, in words."""
    from placement.check.seat import with_warnings
    from placement.cli.window_text import warning_texts

    verdict = item.result.verdict
    gate = any(r.rule == "gate" for r in verdict.reasons)
    words = warning_texts(item.window, end_refused_by_gate=gate)
    return replace(item.result, verdict=with_warnings(verdict, words))


def _show_seat(
    as_json: bool, cards: Cards, outcome: Outcome, found: Sequence[WindowedResult]
) -> None:
    from placement.check.seat import result_json
    from placement.cli.check_text import render
    from placement.cli.reasons_text import worded_json
    from placement.cli.window_text import window_line

    if not found:
        outcome.show(as_json, cards)
        return
    (item,) = found
    result = _with_words(item)
    if as_json:
        data = {**result_json(result), "window": item.window.to_json(), **cards.hosts_json()}
        print(json.dumps(worded_json(data), indent=2))
    else:
        print(window_line(item.window))
        print(render(result, cards.origin(result.snapshot.host)))


def _show_deploy(
    args: argparse.Namespace,
    as_json: bool,
    cards: Cards,
    outcome: Outcome,
    found: Sequence[WindowedResult],
) -> None:
    """The deploy's report with each service's verdict judged over the window."""
    from placement.cli.check_text import render_deploy
    from placement.cli.reasons_text import worded_json
    from placement.cli.window_text import window_line

    deploy = outcome.deploy
    if deploy is None:
        outcome.show(as_json, cards)
        return
    by_id = {id(item.window): item for item in found}
    items = {item.result.verdict.seat: item for item in by_id.values()}
    verdicts = []
    windows: list[dict[str, Any] | None] = []
    for verdict in deploy.verdicts:
        item = items.get(verdict.result.verdict.seat) if verdict.result is not None else None
        if item is None:
            verdicts.append(verdict)
            windows.append(None)
            continue
        result = _with_words(item)
        verdicts.append(replace(verdict, kind=result.verdict.verdict, result=result))
        windows.append(item.window.to_json())
    judged = replace(deploy, verdicts=tuple(verdicts))
    if as_json:
        data = judged.to_json()
        for entry, window in zip(data["verdicts"], windows, strict=True):
            if window is not None:
                entry["window"] = window
        print(json.dumps(worded_json({**data, **cards.hosts_json()}), indent=2))
        return
    if found:
        print(window_line(found[0].window))
    print(render_deploy(judged, cards.origin))
