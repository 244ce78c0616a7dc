"""The catalogue as Prometheus alerting rules over `gpuplan exporter`'s metrics (DESIGN.md "Alerts").

`build_alerts` turns a catalogue into rules (one per host, seat-card or reserve), `render_rules`
into the rule file's YAML. Pure: no I/O. Thresholds are `thresholds`', shared with the report;
the week's two (`GpuplanCardFillingUp`, `GpuplanSeatCannotRestart`) read the same metrics.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from inventory.prometheus.metrics import (
    CARD_ERROR,
    CARD_FREE,
    CARD_RESERVED,
    CARD_TOTAL,
    CARD_USED,
    FOREIGN,
    POLL_SUCCESS,
    PROCESS_USED,
)
from placement.fit.engines import format_util, gate_rule
from placement.report.rows import DriftThreshold
from placement.report.thresholds import (
    DEFAULT_FOR,
    FILLING_UP_DAYS,
    FILLING_UP_PERCENT,
    FILLING_UP_WINDOW_DAYS,
    FOREIGN_MEMORY_BYTES,
    drift_bound_bytes,
    kv_pin_flag,
)
from seats.errors import BadInputError
from seats.model import Catalogue, Reserve, Seat
from seats.units import format_bytes

GROUP = "gpuplan"

# The seven alerts, in the order the file lists them (DESIGN.md's table).
RESERVE_BROKEN = "GpuplanReserveBroken"
BELOW_MARGIN = "GpuplanBelowMargin"
SEAT_DRIFT = "GpuplanSeatDrift"
SEAT_DOWN = "GpuplanSeatDown"
FOREIGN_MEMORY = "GpuplanForeignMemory"
EXPORTER_DOWN = "GpuplanExporterDown"
CARD_ERROR_ALERT = "GpuplanCardError"
FILLING_UP = "GpuplanCardFillingUp"
CANNOT_RESTART = "GpuplanSeatCannotRestart"
ALERTS = (
    RESERVE_BROKEN,
    BELOW_MARGIN,
    SEAT_DRIFT,
    SEAT_DOWN,
    FOREIGN_MEMORY,
    EXPORTER_DOWN,
    CARD_ERROR_ALERT,
    FILLING_UP,
    CANNOT_RESTART,
)
SEVERITY = {
    RESERVE_BROKEN: "critical",
    BELOW_MARGIN: "critical",
    SEAT_DRIFT: "warning",
    SEAT_DOWN: "warning",
    FOREIGN_MEMORY: "warning",
    EXPORTER_DOWN: "critical",
    CARD_ERROR_ALERT: "critical",
    FILLING_UP: "warning",
    CANNOT_RESTART: "warning",
}
# Each alert's label set besides alertname and severity; the expressions aggregate to exactly
# these (a scrape adds job and instance, which must not split or rename an alert).
LABELS = {
    RESERVE_BROKEN: ("host", "gpu", "reserve"),
    BELOW_MARGIN: ("host", "gpu"),
    SEAT_DRIFT: ("host", "gpu", "seat"),
    SEAT_DOWN: ("host", "seat"),
    FOREIGN_MEMORY: ("host", "gpu"),
    EXPORTER_DOWN: ("host",),
    CARD_ERROR_ALERT: ("host", "gpu"),
    FILLING_UP: ("host", "gpu"),
    CANNOT_RESTART: ("host", "gpu", "seat"),
}

_DURATION = re.compile(r"^(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?$")


# --- the pieces of an expression ---------------------------------------------------------


@dataclass(frozen=True)
class Selector:
    """One vector selector: a metric and its label matchers (label, op, value)."""

    metric: str
    matchers: tuple[tuple[str, str, str], ...]

    def text(self) -> str:
        """`metric{label="value", …}` with the values quoted as PromQL strings."""
        inner = ", ".join(f"{label}{op}{_quote(value)}" for label, op, value in self.matchers)
        return f"{self.metric}{{{inner}}}"

    def selects(self, labels: dict[str, str]) -> bool:
        """Whether a series with these labels (its name under `__name__`) is selected."""
        if labels.get("__name__") != self.metric:
            return False
        for label, op, value in self.matchers:
            have = labels.get(label, "")
            if op == "=" and have != value:
                return False
            if op == "!=" and have == value:
                return False
            if op == "=~" and re.fullmatch(value, have) is None:
                return False
        return True


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule of the file, and the selectors its expression reads."""

    alert: str
    expr: str
    summary: str
    description: str
    # Constant labels besides severity: the ones of LABELS the rule is about (values equal to the
    # expression's own), so no two rules of one alert share a label set (promtool's lint).
    labels: tuple[tuple[str, str], ...] = ()
    selectors: tuple[Selector, ...] = ()


@dataclass(frozen=True)
class Alerts:
    """The rules of one catalogue, the options they were made with, and what was left out."""

    rules: tuple[AlertRule, ...]
    for_: str
    threshold: DriftThreshold
    notes: tuple[str, ...] = field(default=())


def _quote(value: str) -> str:
    """A PromQL string literal (Go escapes are a superset of JSON's)."""
    return json.dumps(value, ensure_ascii=False)


def _literal(text: str) -> str:
    """Catalogue text placed in an annotation: `{{` would start a Go template action."""
    return text.replace("{{", '{{ "{{" }}')


def _number(value: float) -> str:
    """A float as PromQL (and Go templates) read it: whole numbers without a fraction."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _cards_regex(cards: Sequence[int]) -> str:
    return "|".join(str(c) for c in cards)


def parse_for(text: str) -> str:
    """A Prometheus duration for `for:` ('5m', '1h30m', '0'); bad input (exit 2) otherwise."""
    value = text.strip()
    if value and value.strip("0") == "":
        return "0s"
    if not value or _DURATION.match(value) is None:
        raise BadInputError(
            f"--for {text!r}: write a Prometheus duration such as 5m, 90s or 1h30m "
            "(whole numbers, units ms s m h d w y)"
        )
    if not re.sub(r"[^1-9]", "", value):  # 0m, 0h0s: no wait, said as 0s
        return "0s"
    return value


# --- the rules, one function per alert ---------------------------------------------------


def _re2_literal(text: str) -> str:
    """`text` as a regex matching itself: RE2's metacharacters escaped, nothing else."""
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", text)


def _reserve_broken(reserve: Reserve) -> tuple[str, tuple[Selector, ...]]:
    """Others' bytes on the reserve's card, when above what the reserve leaves them.

    `placement.fit.reserves`' definition, as the report's range query writes it too: others =
    the card's used bytes − its own seats' process bytes; the allowance is
    `reserve_allowance_bytes` on the card's live CUDA total (total − driver reserve; a v1-only
    card has no reserve series, counted as 0).
    """
    where = (("host", "=", reserve.host), ("gpu", "=", str(reserve.gpu)))
    used = Selector(CARD_USED, where)
    own = Selector(
        PROCESS_USED, (*where, ("seat", "=~", "|".join(_re2_literal(s) for s in reserve.for_)))
    )
    card_used = f"sum by (host, gpu) ({used.text()})"
    held = f"({card_used} - (sum by (host, gpu) ({own.text()}) or {card_used} * 0))"
    if reserve.amount_bytes == "card":
        return f"{held} > 0", (used, own)
    total = Selector(CARD_TOTAL, where)
    driver = Selector(CARD_RESERVED, where)
    cuda_total = (
        f"sum by (host, gpu) ({total.text()}) - "
        f"sum by (host, gpu) ({driver.text()} or {total.text()} * 0)"
    )
    allowance = f"clamp_min({cuda_total} - {int(reserve.amount_bytes)}, 0)"
    return f"{held} > on (host, gpu) {allowance}", (used, own, total, driver)


def reserve_rule(reserve: Reserve) -> AlertRule:
    """GpuplanReserveBroken for one reserve."""
    expr, selectors = _reserve_broken(reserve)
    seats = ", ".join(reserve.for_)
    if reserve.amount_bytes == "card":
        held = f"a card held whole for {seats}"
    else:
        held = (
            f"more than the card less its {format_bytes(int(reserve.amount_bytes))} "
            f"reserve leaves them (held for {seats})"
        )
    return AlertRule(
        alert=RESERVE_BROKEN,
        expr=expr,
        labels=(("host", reserve.host), ("gpu", str(reserve.gpu)), ("reserve", reserve.name)),
        summary=_literal(
            f"{reserve.name} broken on {reserve.host} card {reserve.gpu}: processes other than "
            f"{seats} hold "
        )
        + "{{ $value | humanize1024 }}B, "
        + _literal(held),
        description=_literal(
            f"Free card {reserve.gpu} of {reserve.host}: stop what is not {seats} there "
            f"(gpuplan ledger names it), or release {reserve.name} in the catalogue."
        ),
        selectors=selectors,
    )


def margin_rule(host: str, margin_bytes: int) -> AlertRule:
    """GpuplanBelowMargin for one host."""
    free = Selector(CARD_FREE, (("host", "=", host),))
    return AlertRule(
        alert=BELOW_MARGIN,
        expr=f"sum by (host, gpu) ({free.text()}) < {margin_bytes}",
        labels=(("host", host),),
        summary=_literal(f"{host} card ")
        + "{{ $labels.gpu }} has {{ $value | humanize1024 }}B free, "
        + _literal(f"below the host's margin of {format_bytes(margin_bytes)}"),
        description="Find what grew on the card (gpuplan ledger) and move or shrink a seat "
        "before an engine on it runs out of memory.",
        selectors=(free,),
    )


def drift_rule(host: str, seats: Sequence[Seat], threshold: DriftThreshold) -> AlertRule:
    """GpuplanSeatDrift for the running seats with a `match` of one host, on each of their cards.

    The value is the drift: the seat's bytes on the card less its resident, signed. The advice
    is the report's (advice.drift_advice) for a seat holding more, or less, than declared.
    """
    selectors = []
    terms = []
    for seat in seats:
        bound = drift_bound_bytes(seat.resident_bytes, threshold.percent, threshold.size_bytes)
        for card in seat.pinned_cards or ():
            held = Selector(
                PROCESS_USED,
                (("host", "=", host), ("gpu", "=", str(card)), ("seat", "=", seat.name)),
            )
            selectors.append(held)
            drift = f"sum by (host, gpu, seat) ({held.text()}) - {seat.resident_bytes}"
            terms.append(f"{drift} >= {_number(bound)} or {drift} <= -{_number(bound)}")
    keep = "set its resident to what it holds, or look for a leak if it keeps growing"
    pins = [(s, flag) for s in seats if (flag := kv_pin_flag(s)) is not None]
    unpinned = [_quote(s.name) for s, _ in pins]
    more = keep
    if pins:
        flag = pins[0][1]
        more = (
            "{{ if eq $labels.seat " + " ".join(unpinned) + " }}pin its KV cache "
            f"({flag}) or set its resident to what it holds{{{{ else }}}}" + keep + "{{ end }}"
        )
    return AlertRule(
        alert=SEAT_DRIFT,
        expr=" or ".join(terms),
        labels=(("host", host),),
        summary="{{ $labels.seat }} on "
        + _literal(host)
        + " card {{ $labels.gpu }} drifted {{ $value | humanize1024 }}B from its declared resident "
        + f"(drift threshold {threshold.text()})",
        description="{{ $labels.seat }} holds {{ if gt $value 0.0 }}more than declared: "
        + more
        + ".{{ else }}less than declared: lower its declared resident to free plannable room."
        + "{{ end }}",
        selectors=tuple(selectors),
    )


def down_rule(host: str, seats: Sequence[Seat]) -> AlertRule:
    """GpuplanSeatDown for the running seats with a `match` of one host: polled, their cards
    fine, and no process of the seat on them. One rule per host; `label_replace` names the seat.

    The value is the seat's resident: the bytes still held for it.
    """
    polled = Selector(POLL_SUCCESS, (("host", "=", host),))
    selectors = [polled]
    terms = []
    for seat in seats:
        on = _cards_regex(seat.pinned_cards or ())
        process = Selector(
            PROCESS_USED, (("host", "=", host), ("gpu", "=~", on), ("seat", "=", seat.name))
        )
        lost = Selector(CARD_ERROR, (("host", "=", host), ("gpu", "=~", on)))
        selectors += [process, lost]
        down = (
            f"(min by (host) ({polled.text()}) == 1) * {seat.resident_bytes}"
            f" unless on (host) {process.text()}"
            f" unless on (host) ({lost.text()} == 1)"
        )
        # A replacement's `$` would expand a regex group: `$$` is a literal one.
        name = _quote(seat.name.replace("$", "$$"))
        terms.append(f'label_replace({down}, "seat", {name}, "", "")')
    return AlertRule(
        alert=SEAT_DOWN,
        expr=" or ".join(terms),
        labels=(("host", host),),
        summary="{{ $labels.seat }} is down on "
        + _literal(host)
        + ": no process on its cards, and {{ $value | humanize1024 }}B stay held for it",
        description="Bring {{ $labels.seat }} back (docker compose up -d), or retire it in the "
        "catalogue so its place is freed.",
        selectors=tuple(selectors),
    )


def foreign_rule(host: str, broken: Sequence[tuple[str, tuple[Selector, ...]]]) -> AlertRule:
    """GpuplanForeignMemory for one host; a card whose reserve is broken is left to that alert."""
    foreign = Selector(PROCESS_USED, (("host", "=", host), ("seat", "=", FOREIGN)))
    expr = f"sum by (host, gpu) ({foreign.text()}) >= {FOREIGN_MEMORY_BYTES}"
    selectors: list[Selector] = [foreign]
    if broken:
        expr += " unless on (host, gpu) (" + " or ".join(f"({e})" for e, _ in broken) + ")"
        selectors += [s for _, sel in broken for s in sel]
    return AlertRule(
        alert=FOREIGN_MEMORY,
        expr=expr,
        labels=(("host", host),),
        summary=_literal(f"{host} card ")
        + "{{ $labels.gpu }}: {{ $value | humanize1024 }}B held by processes that match no seat "
        + f"({format_bytes(FOREIGN_MEMORY_BYTES)} or more)",
        description="Name them in the catalogue (a seat with a match) or stop them; "
        "gpuplan ledger lists their PIDs.",
        selectors=tuple(selectors),
    )


def exporter_rule(host: str) -> AlertRule:
    """GpuplanExporterDown for one host: its poll failed, or it has no series at all."""
    polled = Selector(POLL_SUCCESS, (("host", "=", host),))
    return AlertRule(
        alert=EXPORTER_DOWN,
        expr=f"min by (host) ({polled.text()}) == 0 or absent({polled.text()})",
        labels=(("host", host),),
        summary=_literal(
            f"gpuplan exporter of {host} is down or cannot read NVML: no card figures, "
            "so the other gpuplan alerts are blind there"
        ),
        description="Check the exporter on the host (systemctl status gpuplan-exporter) "
        "and NVML (nvidia-smi).",
        selectors=(polled,),
    )


def card_error_rule(host: str) -> AlertRule:
    """GpuplanCardError for one host."""
    error = Selector(CARD_ERROR, (("host", "=", host),))
    return AlertRule(
        alert=CARD_ERROR_ALERT,
        expr=f"max by (host, gpu) ({error.text()}) == 1",
        labels=(("host", host),),
        summary=_literal(f"{host} card ")
        + "{{ $labels.gpu }} failed to read through NVML: no figures, and its seats cannot run",
        description="Run nvidia-smi on the host: a lost card (GpuIsLost) needs a reset or a "
        "reboot, and its seats a place elsewhere meanwhile (gpuplan plan).",
        selectors=(error,),
    )


def _cuda_total(where: tuple[tuple[str, str, str], ...]) -> tuple[str, tuple[Selector, ...]]:
    """A card's CUDA total (NVML total − driver reserve; a v1-only card has no reserve series,
    counted as 0), per (host, gpu), and the selectors it reads."""
    total = Selector(CARD_TOTAL, where)
    driver = Selector(CARD_RESERVED, where)
    text = (
        f"(sum by (host, gpu) ({total.text()}) - "
        f"sum by (host, gpu) ({driver.text()} or {total.text()} * 0))"
    )
    return text, (total, driver)


def filling_up_rule(host: str, margin_bytes: int) -> AlertRule:
    """GpuplanCardFillingUp for one host: a card whose room (free − the host's margin) is under
    FILLING_UP_PERCENT of its CUDA total now, and whose daily minima of room over the last
    FILLING_UP_WINDOW_DAYS, fitted as `predict_linear` fits them, fall below zero within
    FILLING_UP_DAYS. The value is the room now.

    The daily minima are a subquery at a 1-day step over `min_over_time(…[1d])`, so the fit sees
    one point a day (each the day's lowest room), as `check --window`'s rule `trend` does.
    """
    where = (("host", "=", host),)
    free = Selector(CARD_FREE, where)
    cuda_total, read = _cuda_total(where)
    room = f"sum by (host, gpu) ({free.text()}) - {margin_bytes}"
    daily = f"min by (host, gpu) (min_over_time({free.text()}[1d])) - {margin_bytes}"
    window = f"{FILLING_UP_WINDOW_DAYS}d"
    ahead = FILLING_UP_DAYS * 86400
    expr = (
        f"({room} < {_number(FILLING_UP_PERCENT / 100)} * {cuda_total})"
        f" and on (host, gpu) (predict_linear(({daily})[{window}:1d], {ahead}) < 0)"
    )
    margin = f" less its margin of {format_bytes(margin_bytes)}" if margin_bytes else ""
    return AlertRule(
        alert=FILLING_UP,
        expr=expr,
        labels=(("host", host),),
        summary=_literal(f"{host} card ")
        + "{{ $labels.gpu }} has {{ $value | humanize1024 }}B of room"
        + _literal(
            f" (free{margin}), under {_number(FILLING_UP_PERCENT)}% of its CUDA total, and its "
            f"daily lowest room over {FILLING_UP_WINDOW_DAYS} days falls below zero within "
            f"{FILLING_UP_DAYS} days"
        ),
        description="Find whose bytes grow day after day on the card (gpuplan report: co-tenant "
        "patterns; gpuplan ledger --window 7d) and move or cap it before the card runs out.",
        selectors=(free, *read),
    )


def restart_rule(
    host: str, seats: Sequence[tuple[Seat, str]], cuda_context_bytes: int
) -> AlertRule:
    """GpuplanSeatCannotRestart for the request-gated running seats with a `match` of one host,
    on each of their cards: would its own gate pass if it restarted now? DESIGN.md's rule
    `restart` at the newest moment, with no new seat: free + own − cuda_context ≥
    ceil(util × cuda_total). The value is the bytes its gate would be short.

    `ceil(util × cuda_total)` is computed by Prometheus in float64 (under a byte off the exact
    product, as vLLM 0.10's own float product is); `util` is the one the engine judges as
    declared (`gate_rule`, the version's default where none is declared).
    """
    selectors: list[Selector] = []
    terms = []
    for seat, util in seats:
        for card in seat.pinned_cards or ():
            where = (("host", "=", host), ("gpu", "=", str(card)))
            free = Selector(CARD_FREE, where)
            own = Selector(PROCESS_USED, (*where, ("seat", "=", seat.name)))
            cuda_total, read = _cuda_total(where)
            selectors += [free, own, *read]
            request = f"ceil({util} * {cuda_total})"
            left = (
                f"(sum by (host, gpu) ({free.text()}) + sum by (host, gpu) ({own.text()})"
                f" - {cuda_context_bytes})"
            )
            name = _quote(seat.name.replace("$", "$$"))
            terms.append(f'label_replace({request} - {left} > 0, "seat", {name}, "", "")')
    context = format_bytes(cuda_context_bytes)
    return AlertRule(
        alert=CANNOT_RESTART,
        expr=" or ".join(terms),
        labels=(("host", host),),
        summary="{{ $labels.seat }} on "
        + _literal(host)
        + " card {{ $labels.gpu }} could not restart now: its gate would be short by "
        + "{{ $value | humanize1024 }}B (free + its own bytes - "
        + _literal(f"{context} CUDA context < its util request)"),
        description="Do not restart {{ $labels.seat }} (a redeploy or a crash leaves it down) "
        "until its neighbours shrink, or lower its util to what it holds (gpuplan check "
        "--window 7d names who grew into the difference and when).",
        selectors=tuple(selectors),
    )


def _gated(seats: Sequence[Seat]) -> list[tuple[Seat, str]]:
    """The seats whose engine checks a util request at start, with the util as PromQL reads it."""
    gated = []
    for seat in seats:
        rule = gate_rule(seat.engine, propose=False)
        if rule.gating == "gated" and rule.checks_gate and rule.util is not None:
            gated.append((seat, format_util(rule.util)))
    return gated


# --- the whole file ----------------------------------------------------------------------


def build_alerts(
    catalogue: Catalogue, *, for_: str = DEFAULT_FOR, threshold: DriftThreshold | None = None
) -> Alerts:
    """Every rule the catalogue gives, in DESIGN.md's order, and notes on what was left out."""
    threshold = threshold or DriftThreshold()
    running = [s for s in catalogue.seats if s.state == "running"]
    watched = [s for s in running if s.match is not None]
    notes = _notes(catalogue, running, watched, for_)
    broken = {r.name: _reserve_broken(r) for r in catalogue.reserves}
    rules: list[AlertRule] = [reserve_rule(r) for r in catalogue.reserves]
    rules += [
        margin_rule(host, spec.margin_bytes)
        for host, spec in catalogue.hosts.items()
        if spec.margin_bytes > 0
    ]
    by_host = {h: [s for s in watched if s.host == h] for h in catalogue.hosts}
    rules += [drift_rule(h, seats, threshold) for h, seats in by_host.items() if seats]
    rules += [down_rule(h, seats) for h, seats in by_host.items() if seats]
    rules += [
        foreign_rule(host, [broken[r.name] for r in catalogue.reserves if r.host == host])
        for host in catalogue.hosts
    ]
    rules += [exporter_rule(host) for host in catalogue.hosts]
    rules += [card_error_rule(host) for host in catalogue.hosts]
    rules += [filling_up_rule(host, spec.margin_bytes) for host, spec in catalogue.hosts.items()]
    gated = {h: _gated(seats) for h, seats in by_host.items()}
    rules += [
        restart_rule(h, seats, catalogue.hosts[h].cuda_context_bytes)
        for h, seats in gated.items()
        if seats
    ]
    return Alerts(tuple(rules), for_, threshold, tuple(notes))


def _notes(
    catalogue: Catalogue, running: Sequence[Seat], watched: Sequence[Seat], for_: str
) -> list[str]:
    """What the file leaves out, and why; said on stderr and at the top of the file."""
    notes: list[str] = []
    if not catalogue.reserves:
        notes.append(f"{RESERVE_BROKEN} left out: the catalogue has no reserves")
    flat = [h for h, spec in catalogue.hosts.items() if spec.margin_bytes == 0]
    if flat:
        notes.append(
            f"{BELOW_MARGIN} left out for {', '.join(flat)}: margin 0 "
            "(free bytes are never below it)"
        )
    if not running:
        notes.append(f"{SEAT_DRIFT} and {SEAT_DOWN} left out: the catalogue has no running seats")
    blind = [s.name for s in running if s.match is None]
    if blind:
        notes.append(
            f"{SEAT_DRIFT} and {SEAT_DOWN} left out for {', '.join(blind)}: no `match`, "
            "so the exporter never attributes a process to it"
        )
    if any(s.name == FOREIGN for s in catalogue.seats):
        notes.append(
            f"a seat is named {FOREIGN!r}, the exporter's seat label for unattributed "
            f"processes: its bytes count as foreign memory too"
        )
    if not any(_gated([s for s in watched])):
        notes.append(
            f"{CANNOT_RESTART} left out: no running seat with a `match` starts on a util request"
        )
    if for_ == "0s":
        notes.append("--for 0: every alert fires on the first evaluation that matches")
    return notes


def rule_dict(rule: AlertRule, for_: str) -> dict[str, object]:
    """One rule as the rule file spells it."""
    return {
        "alert": rule.alert,
        "expr": rule.expr,
        "for": for_,
        # Label values are templates too; `_literal` keeps catalogue names as they are.
        "labels": {"severity": SEVERITY[rule.alert], **{k: _literal(v) for k, v in rule.labels}},
        "annotations": {"summary": rule.summary, "description": rule.description},
    }


def render_rules(alerts: Alerts, *, source: str) -> str:
    """The rule file: a comment naming its source and options, then `groups:` with one group.

    Written line by line (a fleet's file is megabytes; a YAML emitter takes seconds for it);
    every value is a YAML scalar that reads back as the same string (`_yaml`).
    """
    lines = [
        f"# Prometheus alerting rules from the gpuplan catalogue {_comment(source)}:",
        f"# for {alerts.for_}, drift threshold {alerts.threshold.text()}, foreign memory from "
        f"{format_bytes(FOREIGN_MEMORY_BYTES)}.",
        "# Generated by `gpuplan alerts`: regenerate it when the catalogue changes; do not edit.",
        *(f"# note: {_comment(note)}" for note in alerts.notes),
        "groups:",
        f"- name: {GROUP}",
        "  rules:",
    ]
    for rule in alerts.rules:
        spelled = rule_dict(rule, alerts.for_)
        lines += [f"  - alert: {rule.alert}", f"    expr: {_yaml(rule.expr)}"]
        lines.append(f"    for: {alerts.for_}")
        for key in ("labels", "annotations"):
            lines.append(f"    {key}:")
            values = spelled[key]
            assert isinstance(values, dict)
            lines += [f"      {k}: {_yaml(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _yaml(value: str) -> str:
    """`value` as a one-line YAML scalar: plain when unambiguous, else single-quoted, else JSON."""
    if _PLAIN.match(value) and value.lower() not in _YAML_WORDS:
        return value
    if value.isascii() and value.isprintable():
        return "'" + value.replace("'", "''") + "'"
    return json.dumps(value)  # a YAML double-quoted scalar: JSON's escapes are YAML's


def _comment(text: str) -> str:
    """Text on one comment line."""
    return " ".join(text.split())
