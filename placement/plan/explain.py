"""Why a seat is not placed: every card of every host it may use, with every rule that binds there.

Each card is judged by the verifier (`placement.fit.verify.judge`); what this adds is the
plan's side: a card the seat fits alone but the plan gave to others, and fragmentation.
Interchangeable seats are explained once per class, and a class once per card state: cards of
one index whose states match judge the seat alike, so each such group is judged once.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

from placement.fit.card import CardKey, CardModel
from placement.fit.engines.note import Note, Said
from placement.fit.state import CardState
from placement.fit.verdict import Reason, Verdict, facts, host_reason
from placement.fit.verify import CardStates, Placement, judge, judge_each
from placement.plan.problem import NewSeat, Problem
from seats.model import Seat
from seats.units import format_bytes


@dataclass
class _Explanation:
    """What explaining one refused seat gathers, host by host."""

    reasons: list[Reason]
    nearest: list[tuple[int, Said]]
    warnings: list[Said]
    need: int
    # Per host, the room of the cards refused for room alone (fragmentation).
    fragment_room: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # Warnings of the refusing cards: only those every one of them gives are about the seat
    # (a util chosen for one full card says nothing of a seat that goes nowhere).
    refusing: list[Said] | None = None

    def refused_with(self, warnings: Sequence[Said]) -> None:
        """Keep, of a refusing card's warnings, those every refusing card gave."""
        if self.refusing is None:
            self.refusing = list(warnings)
        else:
            self.refusing = [w for w in self.refusing if w in warnings]

    def all_warnings(self) -> tuple[Said, ...]:
        """The passing cards' warnings, then those every refusing card gave, once each."""
        return tuple(dict.fromkeys((*self.warnings, *(self.refusing or ()))))


# The name a class's representative is explained under: no catalogue or YAML name holds a NUL,
# so putting each seat's own name back into the texts is exact.
_STAND_IN = "\x00seat\x00"


@dataclass
class ExplainClasses:
    """Explanations shared by interchangeable refused seats, beside one set of placements.

    Two seats that differ only in name and priority meet every card alike when nothing on
    the fleet names them (no reserve is for them, no process is theirs, the catalogue does
    not declare them): the verifier reads a seat's name only for those. Such a seat is
    explained once per class, under a stand-in name, and each seat of the class gets that
    explanation with its own name put back. Every other seat is explained on its own.
    """

    named: frozenset[str]
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    # Per class, the positions of its reasons that name the stand-in (the rest are shared),
    # and of its nearest changes.
    naming: dict[str, tuple[int, ...]] = field(default_factory=dict)
    naming_texts: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Each card state's key (`_CardGroups`), worked out once for every class.
    state_keys: dict[int, Hashable] = field(default_factory=dict)
    # Every card's model with all the placements there placed, where the verifier has them
    # (`verified_verdicts`): a stand-in meets each card as that model says.
    placed_models: Mapping[CardKey, CardModel] | None = None

    @classmethod
    def of(
        cls, problem: Problem, placed_models: Mapping[CardKey, CardModel] | None = None
    ) -> ExplainClasses:
        """The names the fleet refers to (those seats are never pooled).

        `placed_models`: the verifier's models of the cards that take the placements explained
        beside (`verified_verdicts`), so that each card's placements are not placed again.
        """
        named = {seat.name for seat in problem.catalogue.seats}
        named.update(name for reserve in problem.catalogue.reserves for name in reserve.for_)
        named.update(
            process.seat
            for snapshot in problem.snapshots
            for card in snapshot.cards
            for process in card.processes
            if process.seat is not None
        )
        models = {**problem.models, **placed_models} if placed_models is not None else None
        return cls(frozenset(named), placed_models=models)

    def key(self, seat: Seat) -> str | None:
        """The seat's class: everything the verifier reads of it but its name; None when named."""
        if seat.name in self.named or "\x00" in seat.name:
            return None
        return seat.model_dump_json(exclude={"name", "priority"})


def explain_refusal(
    problem: Problem,
    new: NewSeat,
    placements: Sequence[Placement],
    failed: Verdict | None = None,
    state_cache: CardStates | None = None,
    classes: ExplainClasses | None = None,
) -> Verdict:
    """Why `new` is not placed: every card of every host it may use, with every binding rule.

    `state_cache`: one dict shared by the calls that explain seats beside the same
    `placements` (see `judge`); the cards' states are then worked out once, not per seat.
    `classes`: likewise shared, so interchangeable seats are explained once (ExplainClasses).
    `failed`: the verifier's own refusal of the seat, said first.
    """
    seat = new.seat
    key = classes.key(seat) if classes is not None else None
    if classes is None or key is None:
        alone = _explain(problem, seat, placements, state_cache)
    else:
        shared = classes.verdicts.get(key)
        if shared is None:
            stand_in = seat.model_copy(update={"name": _STAND_IN})
            shared = classes.verdicts[key] = _explain(
                problem,
                stand_in,
                placements,
                state_cache,
                keys=classes.state_keys,
                placed_models=classes.placed_models,
            )
            said = _SaidCache()
            classes.naming[key] = tuple(
                i for i, r in enumerate(shared.reasons) if _STAND_IN in said(r)
            )
            classes.naming_texts[key] = tuple(
                i for i, text in enumerate(shared.nearest) if _STAND_IN in _fact_text(text)
            )
        alone = _renamed(shared, seat.name, classes.naming[key], classes.naming_texts[key])
    if failed is None:
        return alone
    return replace(
        alone,
        reasons=(*failed.reasons, *alone.reasons),
        warnings=tuple(dict.fromkeys((*failed.warnings, *alone.warnings))),
        # The verifier's own changes come first, as the nearest (they bind where it was put).
        nearest=tuple(dict.fromkeys((*failed.nearest, *alone.nearest))),
    )


def _renamed(
    verdict: Verdict, name: str, naming: Sequence[int], naming_texts: Sequence[int]
) -> Verdict:
    """A class's explanation with the stand-in name replaced by the seat's own (`naming`: the
    positions of the reasons that hold it; the others are the class's own objects;
    `naming_texts`: the same of its nearest changes)."""

    def put(said: Said) -> Said:
        if isinstance(said, Note):
            return said.renamed(_STAND_IN, name)
        return said.replace(_STAND_IN, name)

    reasons = list(verdict.reasons)
    for i in naming:
        reasons[i] = reasons[i].renamed(_STAND_IN, name)
    nearest = list(verdict.nearest)
    for i in naming_texts:
        nearest[i] = put(nearest[i])
    return replace(
        verdict,
        seat=name,
        reasons=tuple(reasons),
        warnings=tuple(map(put, verdict.warnings)),
        nearest=tuple(nearest),
    )


def _explain(
    problem: Problem,
    seat: Seat,
    placements: Sequence[Placement],
    state_cache: CardStates | None,
    *,
    keys: dict[int, Hashable] | None = None,
    placed_models: Mapping[CardKey, CardModel] | None = None,
) -> Verdict:
    """The explanation of one seat on every card of every host it may use.

    `keys` (a class's stand-in, which nothing on the fleet names): its cards' states are those
    of `state_cache`, and cards of one state are judged once (`_CardGroups`); `placed_models`:
    every card with the placements placed (ExplainClasses), where the stand-in's states are read.
    """
    out = _Explanation(reasons=[], nearest=[], warnings=[], need=seat.resident_bytes)
    groups = (
        _CardGroups(keys, placed_models) if keys is not None and state_cache is not None else None
    )
    hosts = [s.host for s in problem.snapshots if seat.host in (None, s.host)]
    if seat.host is not None and seat.host not in hosts:
        out.reasons.append(host_reason(host=seat.host, said="unseen_host", seat=seat.name))
    # judge reads only the placements on the judged host: hand it those alone.
    on_host: dict[str, list[Placement]] = defaultdict(list)
    for placement in placements:
        on_host[placement.host].append(placement)
    one_card = seat.model_copy(update={"gpus": 1}) if seat.card_count > 1 else seat
    for host in hosts:
        passing = _explain_host(
            problem, seat, host, on_host[host], len(hosts) > 1, state_cache, out, groups, one_card
        )
        _passing_reason(seat, host, passing, out)
    _fragmentation(problem, seat, out)
    return Verdict(
        verdict="refuse",
        seat=seat.name,
        host=seat.host,
        cards=(),
        reasons=tuple(out.reasons),
        flags=(),
        warnings=out.all_warnings(),
        nearest=tuple(
            dict.fromkeys(text for _, text in sorted(out.nearest, key=lambda item: item[0]))
        ),
        need_bytes=out.need,
        engine=seat.engine,
    )


def _explain_host(
    problem: Problem,
    seat: Seat,
    host: str,
    here: Sequence[Placement],
    fleet: bool,
    state_cache: CardStates | None,
    out: _Explanation,
    groups: _CardGroups | None = None,
    one_card: Seat | None = None,
) -> list[int]:
    """Judge the seat alone on each card of `host` it may use; the cards where it passes.

    `one_card`: the seat taking one card (what each card judges), where it takes several."""
    snapshot = problem.snapshot(host)
    one_card = one_card or seat
    pinned = seat.pinned_cards
    passing: list[int] = []
    cards = [c.index for c in snapshot.cards if pinned is None or c.index in pinned]
    found = _judged_cards(problem, one_card, host, cards, here, state_cache, groups)
    for index in cards:
        verdict = found[index]
        out.need = max(out.need, verdict.need_bytes or 0)
        if verdict.passed:
            out.warnings.extend(verdict.warnings)
            blocked = _blocked_by(problem, Placement(seat, host, (index,)), here)
            if blocked is None:
                passing.append(index)
            else:
                out.reasons.append(blocked)
            continue
        out.refused_with(verdict.warnings)
        out.reasons.extend(r for r in verdict.reasons if r.rule != "host")
        shorts = [r.short_bytes for r in verdict.reasons if r.short_bytes is not None]
        texts = verdict.nearest
        if fleet:
            texts = tuple(_on_host(text, host) for text in texts)
        out.nearest.extend((min(shorts, default=1 << 62), text) for text in texts)
        only = verdict.reasons[0] if len(verdict.reasons) == 1 else None
        if only is not None and only.rule == "room" and only.room_bytes is not None:
            out.fragment_room[host] += max(0, only.room_bytes)
    return passing


def _judged_cards(
    problem: Problem,
    seat: Seat,
    host: str,
    cards: Sequence[int],
    here: Sequence[Placement],
    state_cache: CardStates | None,
    groups: _CardGroups | None,
) -> dict[int, _Card]:
    """The one-card `seat` judged on each of `cards` of `host`, beside the placements `here`.

    Cards of a state judged already for this class take that judgement (each key names its
    card's index, so no card of this host is another's group); the rest are judged together.
    """
    found: dict[int, _Card] = {}
    if groups is not None and state_cache is not None:
        for index in cards:
            shared = groups.get(state_cache, host, index)
            if shared is not None:
                found[index] = shared
    judging = [index for index in cards if index not in found]
    placed = groups.placed_models if groups is not None else None
    judged = judge_each(
        [problem.card_catalogue(host, index) for index in judging],
        problem.snapshot(host),
        seat,
        judging,
        # The verifier's models have the placements placed already.
        others=here if placed is None else (),
        state_cache=state_cache,
        models=problem.models if placed is None else placed,
    )
    for index, verdict in zip(judging, judged, strict=True):
        found[index] = _Card.of(verdict)
        if groups is not None and state_cache is not None:
            groups.put(state_cache, host, index, verdict)
    return found


@lru_cache(maxsize=65536)
def _on_host(said: Said, host: str) -> Said:
    """A change with each card named as host:card (a fleet has many hosts)."""
    if isinstance(said, Note):
        if any(key == "card" for key, _ in said.facts):
            return Note(said.said, (*said.facts, ("on_host", host)))
        return said
    return re.sub(r"card (\d+)", rf"card {host}:\1", said)


@dataclass(frozen=True)
class _Card:
    """What explaining reads of one card's judgement (`_explain_host`)."""

    passed: bool
    need_bytes: int | None
    reasons: tuple[Reason, ...]
    nearest: tuple[Said, ...]
    warnings: tuple[Said, ...]

    @classmethod
    def of(cls, verdict: Verdict) -> _Card:
        return cls(
            verdict.passed, verdict.need_bytes, verdict.reasons, verdict.nearest, verdict.warnings
        )


class _CardGroups:
    """One stand-in seat's judgements, shared by the cards whose states match.

    A card's state (`CardState`) is everything the verifier reads of the card for a seat that
    nothing there names; two cards whose states agree in every figure and name judge it alike
    but for the host and the card's index. A group's judgement is reused only where it names
    neither its host nor any occupant of its card: then the occupants count only by whether
    there are any (part of the key), and the host only in the reasons' `host` fields, which are
    set anew. On a card of another index it is reused only where the index appears nowhere but
    in the reasons' and figures' `card` fields and as "card N" in its texts, all set anew.
    `keys`: each state's key, by state, shared by every class explained beside one placement.
    """

    def __init__(
        self, keys: dict[int, Hashable], placed_models: Mapping[CardKey, CardModel] | None = None
    ) -> None:
        self.placed_models = placed_models
        self._judged: dict[tuple[Hashable, int], Verdict | None] = {}  # by (key, index)
        self._moved: dict[Hashable, Verdict] = {}  # by key: one that may move to another index
        self._keys = keys

    def get(self, states: CardStates, host: str, index: int) -> _Card | None:
        key = self._key(states, host, index)
        if key is None:
            return None
        found = self._judged.get((key, index))
        if found is None:
            found = self._moved.get(key)
        if found is None:
            return None
        if found.host == host and found.cards == (index,):
            return _Card.of(found)
        moving = found.cards != (index,)
        return _Card(
            passed=found.passed,
            need_bytes=found.need_bytes,
            reasons=tuple(_moved(r, host, index) for r in found.reasons),
            nearest=tuple(_renumbered(t, index) for t in found.nearest)
            if moving
            else found.nearest,
            warnings=tuple(_renumbered(t, index) for t in found.warnings)
            if moving
            else found.warnings,
        )

    def put(self, states: CardStates, host: str, index: int, verdict: Verdict) -> None:
        key = self._key(states, host, index)
        if key is None or (key, index) in self._judged:
            return
        state = states[(host, index, "plan")]
        poolable = _poolable(verdict, state)
        self._judged[(key, index)] = verdict if poolable else None
        if poolable and key not in self._moved and _movable(verdict, index):
            self._moved[key] = verdict

    def _key(self, states: CardStates, host: str, index: int) -> Hashable | None:
        state = states.get((host, index, "plan"))
        if state is None:
            return None
        key = self._keys.get(id(state))
        if key is None:
            key = self._keys[id(state)] = _state_key(state)
        return key


# A card named in a judgement's texts: "card 3", "card(s) 3".
_CARD_WORDS = re.compile(r"\bcard(\(s\))? (\d+)\b")


# The facts of a note that name its card.
_CARD_FACTS = ("card", "cards")


@lru_cache(maxsize=65536)
def _renumbered(said: Said, index: int) -> Said:
    """A text or note of one card's judgement said of card `index`."""
    if isinstance(said, Note):
        return Note(
            said.said,
            tuple(
                (key, index if key == "card" else (index,) if key == "cards" else value)
                for key, value in said.facts
            ),
        )
    return _CARD_WORDS.sub(lambda m: f"card{m.group(1) or ''} {index}", said)


def _uncarded(said: Said) -> str:
    """A text without its "card N" words, or a note's facts but those naming its card."""
    if isinstance(said, Note):
        return "\x00".join(_fact_text(v) for k, v in said.facts if k not in _CARD_FACTS)
    return _CARD_WORDS.sub("", said)


def _movable(verdict: Verdict, index: int) -> bool:
    """True when a one-card judgement names its card's index only where `get` renumbers it."""
    if verdict.cards != (index,):
        return False
    if any(r.card not in (None, index) or r.within is not None for r in verdict.reasons):
        return False
    said = "\x00".join(
        [
            _CARD_WORDS.sub("", "\x00".join([*map(_said, verdict.reasons), *verdict.flags])),
            *map(_uncarded, (*verdict.nearest, *verdict.warnings)),
        ]
    )
    number = re.compile(rf"(?<![\d.]){index}(?![\d.])")
    return number.search(said) is None


def _moved(reason: Reason, host: str, index: int) -> Reason:
    """The same reason on another host and card (a shallow copy: `replace` costs ten times more)."""
    card = reason.card
    new_host = host if reason.host is not None else None
    if (card is None or card == index) and new_host == reason.host:
        return reason
    twin = object.__new__(Reason)
    fields = twin.__dict__
    fields.update(reason.__dict__)
    if card is not None:
        fields["card"] = index
    fields["host"] = new_host
    return twin


def _state_key(state: CardState) -> Hashable:
    """Every figure and name of a card's state but its host and index, its occupants only as any or none."""
    card = state.card
    return (
        card.ok,
        card.reserved_bytes is None,
        bool(state.occupants),
        *(getattr(state, name) for name in _state_fields()),
    )


@lru_cache(maxsize=1)
def _state_fields() -> tuple[str, ...]:
    return tuple(f.name for f in fields(CardState) if f.name not in ("card", "occupants"))


class _SaidCache:
    """`_said` of many reasons, each words-and-facts worked out once: a reason moved to another
    card or host (`_moved`) shares its text, facts and `within` with the one it copies."""

    def __init__(self) -> None:
        self._said: dict[tuple[int, int, int], tuple[Reason, str]] = {}

    def __call__(self, reason: Reason) -> str:
        key = (id(reason.text), id(reason.facts), id(reason.within))
        found = self._said.get(key)
        if found is None:
            # The reason is kept beside its words, so the ids in the key stay its own.
            found = self._said[key] = (reason, _said(reason))
        return found[1]


def _said(reason: Reason) -> str:
    """A reason's words and facts as one string (to look for a name in)."""
    parts = [reason.text, *(_fact_text(value) for _, value in reason.facts)]
    if reason.within is not None:
        parts.append(_said(reason.within))
    return "\x00".join(parts)


def _fact_text(value: object) -> str:
    if isinstance(value, tuple):
        return "\x00".join(map(_fact_text, value))
    if isinstance(value, Note):
        return "\x00".join(_fact_text(fact) for _, fact in value.facts)
    return str(value)


def _poolable(verdict: Verdict, state: CardState) -> bool:
    """True when the judgement names neither its host (outside `host` fields) nor an occupant."""
    said = "\x00".join(
        [
            *map(_said, verdict.reasons),
            *map(_fact_text, (*verdict.nearest, *verdict.warnings)),
            *verdict.flags,
        ]
    )
    names = [*state.occupants, *([verdict.host] if verdict.host else [])]
    return not any(name in said for name in names)


def _passing_reason(seat: Seat, host: str, passing: Sequence[int], out: _Explanation) -> None:
    """Rule `host` for too few passing cards; `room` for a card it fits alone but was given away."""
    if seat.card_count > 1 and len(passing) < seat.card_count:
        out.reasons.append(
            host_reason(
                host=host,
                said="few_cards",
                seat=seat.name,
                cards_wanted=seat.card_count,
                passing=tuple(passing),
            )
        )
    elif passing:
        # Fits alone on a card but the plan gave the room to others (priority, more seats).
        out.reasons.append(
            Reason("room", passing[0], out.need, None, None, host=host, said="alone")
        )


def _fragmentation(problem: Problem, seat: Seat, out: _Explanation) -> None:
    """A host whose cards have the room between them but no card alone: say so."""
    need = out.need
    for host, total in out.fragment_room.items():
        largest = max(
            (c.cuda_total - c.margin_bytes for c in problem.hosts[host] if c.ok), default=0
        )
        if seat.card_count == 1 and total >= need and need <= largest:
            out.nearest.append(
                (
                    1 << 63,
                    f"fragmentation: {format_bytes(total)} of room across {host}'s cards, but no single "
                    f"card has {format_bytes(need)} — no room without a placement decision "
                    "(--allow-moves)",
                )
            )


def _blocked_by(
    problem: Problem, candidate: Placement, placements: Sequence[Placement]
) -> Reason | None:
    """The first placed seat that the candidate would refuse if it started there too."""
    snapshot = problem.snapshot(candidate.host)
    # judge reads only the others on the candidate's host.
    everyone = [*(p for p in placements if p.host == candidate.host), candidate]
    view = problem.host_catalogue(candidate.host)
    for placed in placements:
        if placed.host != candidate.host or not set(placed.cards) & set(candidate.cards):
            continue
        others = [p for p in everyone if p is not placed]
        verdict = judge(
            view, snapshot, placed.seat, placed.cards, others=others, models=problem.models
        )
        if not verdict.passed:
            first = verdict.reasons[0]
            return Reason(
                first.rule,
                candidate.cards[0],
                first.need_bytes,
                first.room_bytes,
                first.short_bytes,
                host=candidate.host,
                said="blocked",
                facts=facts(seat=placed.seat.name, priority=placed.seat.priority),
                within=first,
            )
    return None


# A crowded fleet refuses a seat on hundreds of cards: say the tightest few, count the rest.
SUMMARY_PLACES = 3


@dataclass(frozen=True)
class Summary:
    """A refusal cut short: the reasons of its tightest places, and every rule's count."""

    reasons: tuple[Reason, ...]
    # rule → on how many places (cards; hosts for rule `host`) it binds, most first.
    counts: dict[str, int]
    places: int


def summarise(verdict: Verdict, keep: int = SUMMARY_PLACES) -> Summary | None:
    """The `keep` tightest cards or hosts of a refusal; None when it names at most one more.

    A place is a card (or a host, for a reason on no card). Tightest: the fewest bytes short
    on the rule that binds most there; a place where a rule without bytes binds (exclusive,
    unbounded, error, host …) comes after every place that bytes would free. The reasons
    kept are the verdict's own, in its order; a seat's place where it fits alone but was
    given away (room, no bytes short) counts as the tightest of all.
    """
    places: dict[tuple[str | None, int | None], list[Reason]] = defaultdict(list)
    for reason in verdict.reasons:
        places[(reason.host, reason.card)].append(reason)
    if len(places) <= keep + 1:
        # Three places and a line of counts would say no less in no fewer lines.
        return None
    order = sorted(places, key=lambda place: _tightness(places[place]))
    chosen = set(order[:keep])
    counts: dict[str, int] = defaultdict(int)
    for here in places.values():
        for rule in dict.fromkeys(r.rule for r in here):
            counts[rule] += 1
    return Summary(
        reasons=tuple(r for r in verdict.reasons if (r.host, r.card) in chosen),
        counts=dict(sorted(counts.items(), key=lambda item: -item[1])),
        places=len(places),
    )


def _tightness(reasons: Sequence[Reason]) -> tuple[int, int]:
    """(0, bytes short) where bytes would free the place, else (1, 0)."""
    if any(r.short_bytes is None and r.rule != "room" for r in reasons):
        return (1, 0)
    return (0, max(r.short_bytes or 0 for r in reasons))
