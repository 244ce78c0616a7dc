"""Why a seat is not placed: every card of every host it may use, with every rule that binds there.

Each card is judged by the verifier (`placement.fit.verify.judge`); what this adds is the
plan's side: a card the seat fits alone but the plan gave to others, and fragmentation.
Interchangeable seats are explained once per class, and a class once per card state: cards of
one index whose states match judge the seat alike, so each such group is judged once.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

from placement.fit.card import CardKey, CardModel
from placement.fit.engines.note import Note, Said
from placement.fit.rules import error_reason
from placement.fit.state import CardState, card_state
from placement.fit.verdict import Reason, Verdict, facts, host_reason
from placement.fit.verify import CardStates, Placement, judge, judge_each
from placement.plan.problem import NewSeat, Problem
from seats.model import Seat
from seats.units import format_bytes


@dataclass
class _Explanation:
    """What explaining one refused seat gathers, host by host.

    `reasons`: in order, a reason, or a refusing card whose reasons (but rule `host`) go there
    (`_Card`): written out only when read (`_written`), since a summary shows a few.
    """

    reasons: list[Reason | _Card]
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
        if self.refusing is not None and not self.refusing:
            return  # none left to keep (a crowded fleet's usual case)
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
    explanation with its own name put back (`_Refusal`: its reasons when first read). Every
    other seat is explained on its own.
    """

    named: frozenset[str]
    verdicts: dict[str, _Class] = field(default_factory=dict)
    # Each card state's key (`_CardGroups`), worked out once for every class.
    state_keys: _StateKeys = field(default_factory=lambda: _StateKeys())
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
        alone: Verdict = _explain(problem, seat, placements, state_cache)
    else:
        shared = classes.verdicts.get(key)
        if shared is None:
            stand_in = seat.model_copy(update={"name": _STAND_IN})
            if not classes.verdicts and state_cache is not None:
                _known_states(problem, stand_in, state_cache, classes.placed_models)
            shared = classes.verdicts[key] = _Class(
                _explained(
                    problem,
                    stand_in,
                    placements,
                    state_cache,
                    keys=classes.state_keys,
                    placed_models=classes.placed_models,
                )
            )
        alone = shared.refusal(seat.name)
    if failed is None:
        return alone
    return replace(
        alone,
        reasons=(*failed.reasons, *alone.reasons),
        warnings=tuple(dict.fromkeys((*failed.warnings, *alone.warnings))),
        # The verifier's own changes come first, as the nearest (they bind where it was put).
        nearest=tuple(dict.fromkeys((*failed.nearest, *alone.nearest))),
    )


def _known_states(
    problem: Problem,
    seat: Seat,
    states: CardStates,
    models: Mapping[CardKey, CardModel] | None,
) -> None:
    """Each usable card's state as a seat nothing there names meets it beside the placements
    (`models`: the cards with them placed), put in `states` as `judge` shares it: the first
    class then judges one card per state, as the others do, not every card."""
    if models is None:
        return
    for snapshot in problem.snapshots:
        host = snapshot.host
        for card in snapshot.cards:
            key = (host, card.index, "plan")
            model = models.get((host, card.index))
            if key in states or model is None or error_reason(card, host) is not None:
                continue
            states[key] = card_state(seat, card, model)


class _Class:
    """One class's explanation under the stand-in name, and each of its seats' own.

    The stand-in's reasons are written out, and the positions of those that name it found,
    only when some seat's reasons are read; a summary (`summarise`) is worked out once for the
    class from its cards' judgements and only its few reasons renamed per seat.
    """

    def __init__(self, parts: tuple[Verdict, _Explanation]) -> None:
        self.shell, self.out = parts
        self._reasons: tuple[Reason, ...] | None = None
        self._naming: tuple[int, ...] | None = None
        self._summaries: dict[int, Summary | None] = {}
        self._said = _SaidCache()
        # The positions of the nearest changes that name the stand-in.
        self.naming_texts = tuple(
            i for i, text in enumerate(self.shell.nearest) if _STAND_IN in _fact_text(text)
        )

    def refusal(self, name: str) -> _Refusal:
        """The class's explanation said of seat `name`."""
        shell = self.shell
        nearest = list(shell.nearest)
        for i in self.naming_texts:
            nearest[i] = _put_name(nearest[i], name)
        return _Refusal.of(
            self,
            replace(
                shell,
                seat=name,
                warnings=tuple(_put_name(w, name) for w in shell.warnings),
                nearest=tuple(nearest),
            ),
        )

    def reasons(self, name: str) -> tuple[Reason, ...]:
        """Every reason, said of seat `name`."""
        if self._reasons is None:
            self._reasons = tuple(_written(self.out.reasons))
            said = self._said
            self._naming = tuple(i for i, r in enumerate(self._reasons) if _STAND_IN in said(r))
        reasons = list(self._reasons)
        for i in self._naming or ():
            reasons[i] = reasons[i].renamed(_STAND_IN, name)
        return tuple(reasons)

    def summary(self, name: str, keep: int) -> Summary | None:
        """`summarise` of seat `name`'s refusal, its places and counts worked out once."""
        if keep not in self._summaries:
            self._summaries[keep] = _summary(self.out.reasons, keep)
        found = self._summaries[keep]
        if found is None:
            return None
        said = self._said
        return replace(
            found,
            reasons=tuple(
                r.renamed(_STAND_IN, name) if _STAND_IN in said(r) else r for r in found.reasons
            ),
        )


def _put_name(said: Said, name: str) -> Said:
    """A text or note of the stand-in's, said of seat `name`."""
    if isinstance(said, Note):
        return said.renamed(_STAND_IN, name)
    return said.replace(_STAND_IN, name)


class _Reasons:
    """A `_Refusal`'s reasons: written out by its class when first read, then kept."""

    def __get__(self, refusal: _Refusal | None, owner: type | None = None) -> Any:
        if refusal is None:
            return ()
        held = refusal.__dict__
        found = held.get("reasons")
        if found is None:
            explained: _Class = held["_class"]
            found = held["reasons"] = explained.reasons(refusal.seat)
        return found

    def __set__(self, refusal: _Refusal, reasons: tuple[Reason, ...]) -> None:
        refusal.__dict__["reasons"] = reasons


class _Refusal(Verdict):
    """A class's refusal said of one of its seats, its reasons written out when first read.

    Equal to the `Verdict` of the same figures (what `_explain` of the seat alone gives)."""

    _class: _Class | None = None
    reasons = _Reasons()  # type: ignore[assignment]

    @classmethod
    def of(cls, explained: _Class, verdict: Verdict) -> _Refusal:
        twin = object.__new__(cls)
        for name, value in verdict.__dict__.items():
            if name != "reasons":
                object.__setattr__(twin, name, value)
        object.__setattr__(twin, "_class", explained)
        return twin

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Verdict):
            return NotImplemented
        return all(
            getattr(self, f.name) == getattr(other, f.name) for f in fields(Verdict) if f.compare
        )

    __hash__ = Verdict.__hash__

    def summary(self, keep: int) -> Summary | None:
        """`summarise(self, keep)`, from the class's cards without writing every reason out."""
        explained: _Class | None = self.__dict__.get("_class")
        if explained is None:
            return summarise(self, keep, lazy=False)
        return explained.summary(self.seat, keep)


def _written(items: Sequence[Reason | _Card]) -> Iterator[Reason]:
    """The reasons of an explanation in order: a card's own but rule `host` in its place."""
    for item in items:
        if isinstance(item, Reason):
            yield item
        else:
            yield from (r for r in item.reasons if r.rule != "host")


def _explained(
    problem: Problem,
    seat: Seat,
    placements: Sequence[Placement],
    state_cache: CardStates | None,
    *,
    keys: _StateKeys | None = None,
    placed_models: Mapping[CardKey, CardModel] | None = None,
) -> tuple[Verdict, _Explanation]:
    """`_explain` of the seat, its reasons left as gathered (the verdict holds none)."""
    out = _gathered(problem, seat, placements, state_cache, keys=keys, placed_models=placed_models)
    return _verdict_of(seat, out, ()), out


def _explain(
    problem: Problem,
    seat: Seat,
    placements: Sequence[Placement],
    state_cache: CardStates | None,
    *,
    keys: _StateKeys | None = None,
    placed_models: Mapping[CardKey, CardModel] | None = None,
) -> Verdict:
    """The explanation of one seat on every card of every host it may use.

    `keys` (a class's stand-in, which nothing on the fleet names): its cards' states are those
    of `state_cache`, and cards of one state are judged once (`_CardGroups`); `placed_models`:
    every card with the placements placed (ExplainClasses), where the stand-in's states are read.
    """
    out = _gathered(problem, seat, placements, state_cache, keys=keys, placed_models=placed_models)
    return _verdict_of(seat, out, tuple(_written(out.reasons)))


def _gathered(
    problem: Problem,
    seat: Seat,
    placements: Sequence[Placement],
    state_cache: CardStates | None,
    *,
    keys: _StateKeys | None = None,
    placed_models: Mapping[CardKey, CardModel] | None = None,
) -> _Explanation:
    """What `_explain` gathers of the seat, host by host (see there)."""
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
    return out


def _verdict_of(seat: Seat, out: _Explanation, reasons: tuple[Reason, ...]) -> Verdict:
    """The refusal `out` gathered, with `reasons`."""
    return Verdict(
        verdict="refuse",
        seat=seat.name,
        host=seat.host,
        cards=(),
        reasons=reasons,
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
    for card in found:
        judged = card.judged
        if judged.need_bytes > out.need:
            out.need = judged.need_bytes
        if judged.passed:
            index = card.index
            out.warnings.extend(judged.warnings)
            blocked = _blocked_by(problem, Placement(seat, host, (index,)), here)
            if blocked is None:
                passing.append(index)
            else:
                out.reasons.append(blocked)
            continue
        out.refused_with(judged.warnings)
        # Its reasons as judged (the card's own host and index put in when written out): the
        # rules and bytes read here are the same.
        out.reasons.append(card)
        texts = judged.nearest
        if texts:
            if fleet:
                texts = tuple(_on_host(text, host) for text in texts)
            short = judged.short
            out.nearest.extend((short, text) for text in texts)
        if judged.room is not None:
            out.fragment_room[host] += judged.room
    return passing


def _judged_cards(
    problem: Problem,
    seat: Seat,
    host: str,
    cards: Sequence[int],
    here: Sequence[Placement],
    state_cache: CardStates | None,
    groups: _CardGroups | None,
) -> list[_Card]:
    """The one-card `seat` judged on each of `cards` of `host`, beside the placements `here`
    (in the order of `cards`).

    Cards of a state judged already for this class take that judgement (each key names its
    card's index, so no card of this host is another's group); the rest are judged together.
    """
    found: list[_Card | None] = [None] * len(cards)
    judging: list[int] = []
    if groups is not None and state_cache is not None:
        for i, index in enumerate(cards):
            shared = groups.get(state_cache, host, index)
            if shared is None:
                judging.append(i)
            else:
                found[i] = shared
    else:
        judging = list(range(len(cards)))
    if judging:
        placed = groups.placed_models if groups is not None else None
        indices = [cards[i] for i in judging]
        judged = judge_each(
            [problem.card_catalogue(host, index) for index in indices],
            problem.snapshot(host),
            seat,
            indices,
            # The verifier's models have the placements placed already.
            others=here if placed is None else (),
            state_cache=state_cache,
            models=problem.models if placed is None else placed,
        )
        for i, index, verdict in zip(judging, indices, judged, strict=True):
            one = _Judged(verdict)
            found[i] = _Card(one, index=index)
            if groups is not None and state_cache is not None:
                groups.put(state_cache, host, index, one)
    return found  # type: ignore[return-value]


@lru_cache(maxsize=65536)
def _on_host(said: Said, host: str) -> Said:
    """A change with each card named as host:card (a fleet has many hosts)."""
    if isinstance(said, Note):
        if any(key == "card" for key, _ in said.facts):
            return Note(said.said, (*said.facts, ("on_host", host)))
        return said
    return re.sub(r"card (\d+)", rf"card {host}:\1", said)


class _Judged:
    """What explaining reads of one card's judgement, said of one card index (`_CardGroups`
    shares it between the cards of one state): the reasons as judged (`source`), the nearest
    changes and warnings said of the index, the fewest bytes short (the nearest changes' order),
    and the room of a card refused for room alone (fragmentation), else None."""

    __slots__ = (
        "cards",
        "host",
        "nearest",
        "need_bytes",
        "passed",
        "room",
        "short",
        "source",
        "verdict",
        "warnings",
    )

    def __init__(self, verdict: Verdict) -> None:
        source = verdict.reasons
        self.passed, self.need_bytes, self.source = verdict.passed, verdict.need_bytes or 0, source
        self.nearest, self.warnings = verdict.nearest, verdict.warnings
        self.host, self.cards = verdict.host, verdict.cards
        shorts = [r.short_bytes for r in source if r.short_bytes is not None]
        self.short = min(shorts) if shorts else 1 << 62
        only = source[0] if len(source) == 1 else None
        self.room = (
            max(0, only.room_bytes)
            if only is not None and only.rule == "room" and only.room_bytes is not None
            else None
        )
        self.verdict = verdict

    def on_card(self, index: int) -> _Judged:
        """The same judgement said of card `index` (its texts renumbered)."""
        twin = object.__new__(_Judged)
        for name in _Judged.__slots__:
            setattr(twin, name, getattr(self, name))
        twin.nearest = tuple(_renumbered(t, index) for t in self.nearest)
        twin.warnings = tuple(_renumbered(t, index) for t in self.warnings)
        return twin


class _Card:
    """One card's judgement in an explanation (`_explain_host`): `judged`, on card `index`.

    `source`: the judgement's reasons as judged; where the judgement is another card's of the
    same state (`_CardGroups`), `host` is this card's, and `reasons` are the source's said of
    this host and card (`_moved`), worked out when first read; `host` None: its own.
    """

    __slots__ = ("_reasons", "host", "index", "judged", "source")

    def __init__(self, judged: _Judged, host: str | None = None, index: int = 0) -> None:
        self.judged, self.source, self.host, self.index = judged, judged.source, host, index
        self._reasons: tuple[Reason, ...] | None = None if host is not None else judged.source

    @property
    def reasons(self) -> tuple[Reason, ...]:
        found = self._reasons
        if found is None:
            host, index = self.host or "", self.index
            found = self._reasons = tuple(_moved(r, host, index) for r in self.source)
        return found

    def place(self, reason: Reason) -> tuple[str | None, int | None]:
        """Where one of `source` binds once said of this card: (host, card), as `_moved` puts it."""
        if self.host is None:
            return reason.host, reason.card
        return (
            self.host if reason.host is not None else None,
            self.index if reason.card is not None else None,
        )


@dataclass
class _StateKeys:
    """Each card state's key (`_state_key`), by the state's id and by its card: worked out once
    for every class explained beside one placement (the stand-in meets each card alike)."""

    by_state: dict[int, int] = field(default_factory=dict)
    by_card: dict[tuple[str, int], int] = field(default_factory=dict)
    numbers: dict[Hashable, int] = field(default_factory=dict)  # each key's number


class _CardGroups:
    """One stand-in seat's judgements, shared by the cards whose states match.

    A card's state (`CardState`) is everything the verifier reads of the card for a seat that
    nothing there names; two cards whose states agree in every figure and name judge it alike
    but for the host and the card's index. A group's judgement is reused only where it names
    neither its host nor any occupant of its card: then the occupants count only by whether
    there are any (part of the key), and the host only in the reasons' `host` fields, which are
    set anew. On a card of another index it is reused only where the index appears nowhere but
    in the reasons' and figures' `card` fields and as "card N" in its texts, all set anew.
    `keys`: each state's key, shared by every class explained beside one placement.
    """

    def __init__(
        self, keys: _StateKeys, placed_models: Mapping[CardKey, CardModel] | None = None
    ) -> None:
        self.placed_models = placed_models
        self._judged: dict[tuple[int, int], _Judged | None] = {}  # by (key, index)
        self._moved: dict[int, _Judged] = {}  # by key: one that may move to another index
        # What a card of (key, index) reads, once found: said of that index.
        self._found: dict[tuple[int, int], _Judged] = {}
        self._keys = keys

    def get(self, states: CardStates, host: str, index: int) -> _Card | None:
        key = self._key(states, host, index)
        if key is None:
            return None
        judged = self._found.get((key, index))
        if judged is None:
            found = self._judged.get((key, index))
            if found is None:
                found = self._moved.get(key)
            if found is None:
                return None
            judged = found if found.cards == (index,) else found.on_card(index)
            self._found[(key, index)] = judged
        if judged.host == host and judged.cards == (index,):
            return _Card(judged, index=index)  # the card judged itself: its own reasons
        return _Card(judged, host, index)

    def put(self, states: CardStates, host: str, index: int, judged: _Judged) -> None:
        key = self._key(states, host, index)
        if key is None or (key, index) in self._judged:
            return
        state = states[(host, index, "plan")]
        verdict = judged.verdict
        poolable = _poolable(verdict, state)
        self._judged[(key, index)] = judged if poolable else None
        if poolable and key not in self._moved and _movable(verdict, index):
            self._moved[key] = judged

    def _key(self, states: CardStates, host: str, index: int) -> int | None:
        keys = self._keys
        key = keys.by_card.get((host, index))
        if key is not None:
            return key
        state = states.get((host, index, "plan"))
        if state is None:
            return None
        key = keys.by_state.get(id(state))
        if key is None:
            # Each key is a long tuple: named by a small number, hashed once.
            key = keys.by_state[id(state)] = keys.numbers.setdefault(
                _state_key(state), len(keys.numbers)
            )
        keys.by_card[(host, index)] = key
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


def summarise(verdict: Verdict, keep: int = SUMMARY_PLACES, *, lazy: bool = True) -> Summary | None:
    """The `keep` tightest cards or hosts of a refusal; None when it names at most one more.

    A place is a card (or a host, for a reason on no card). Tightest: the fewest bytes short
    on the rule that binds most there; a place where a rule without bytes binds (exclusive,
    unbounded, error, host …) comes after every place that bytes would free. The reasons
    kept are the verdict's own, in its order; a seat's place where it fits alone but was
    given away (room, no bytes short) counts as the tightest of all. A class's refusal
    (`_Refusal`) is summarised from its cards' judgements, its reasons not all written out
    (`lazy=False`: from its reasons, as any verdict).
    """
    if lazy and isinstance(verdict, _Refusal):
        return verdict.summary(keep)
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


def _summary(items: Sequence[Reason | _Card], keep: int) -> Summary | None:
    """`summarise` of the reasons `_written(items)` gives, reading each card's judgement as judged
    (its rules and bytes are its card's) and writing out only the reasons of the places kept."""
    places = _places(items)
    if len(places) <= keep + 1:
        return None
    order = sorted(places, key=lambda place: (1, 0) if places[place][0] else (0, places[place][1]))
    chosen = set(order[:keep])
    counts: dict[str, int] = defaultdict(int)
    for _, _, rules in places.values():
        for rule in rules:
            counts[rule] += 1
    return Summary(
        reasons=tuple(_kept(items, chosen)),
        counts=dict(sorted(counts.items(), key=lambda item: -item[1])),
        places=len(places),
    )


_Place = tuple[str | None, int | None]


def _places(items: Sequence[Reason | _Card]) -> dict[_Place, list[Any]]:
    """Per place (host, card), in order: whether a rule without bytes but `room` binds there,
    the most bytes short, and its rules in order (`_tightness`' figures and the counts')."""
    places: dict[_Place, list[Any]] = {}

    def meet(place: _Place, reason: Reason) -> None:
        found = places.get(place)
        if found is None:
            found = places[place] = [False, 0, {}]
        short = reason.short_bytes
        if short is None and reason.rule != "room":
            found[0] = True
        elif short is not None and short > found[1]:
            found[1] = short
        found[2][reason.rule] = None

    for item in items:
        if isinstance(item, Reason):
            meet((item.host, item.card), item)
            continue
        for reason in item.source:
            if reason.rule != "host":
                meet(item.place(reason), reason)
    return places


def _kept(items: Sequence[Reason | _Card], chosen: set[_Place]) -> Iterator[Reason]:
    """The reasons `_written(items)` gives on the places `chosen`, in order; a card's written out
    only where one of them is its place."""
    for item in items:
        if isinstance(item, Reason):
            if (item.host, item.card) in chosen:
                yield item
        elif any(item.place(r) in chosen for r in item.source if r.rule != "host"):
            yield from (r for r in item.reasons if r.rule != "host" and (r.host, r.card) in chosen)


def _tightness(reasons: Sequence[Reason]) -> tuple[int, int]:
    """(0, bytes short) where bytes would free the place, else (1, 0)."""
    if any(r.short_bytes is None and r.rule != "room" for r in reasons):
        return (1, 0)
    return (0, max(r.short_bytes or 0 for r in reasons))
