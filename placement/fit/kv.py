"""Rule `kv_capacity`: vLLM's second refusal, a KV cache that cannot hold one sequence of max_model_len.

DESIGN.md "vLLM's second refusal". With an `engine.profile`, the KV cache is the pinned
`kv_cache_memory`, else `ceil(util × cuda_total) − weights − non_kv`; it holds
floor(KV bytes / kv_bytes_per_token) tokens, and vLLM refuses to start when that is below
max_model_len. Everything here is per card, in exact integer bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from placement.fit.capacity import cuda_context_bytes
from placement.fit.engines import (
    engine_of,
    format_util,
    passes_gate,
    requested_bytes,
    requests_util,
    smallest_util_covering,
)
from placement.fit.engines.note import Note, note
from placement.fit.resident_sum import leftover_kv_bytes, resident_bytes
from placement.fit.state import CardState
from placement.fit.verdict import Reason, facts
from seats.model import Catalogue, Profile, Seat


def profile_of(seat: Seat) -> Profile | None:
    """The seat's profile when the util-request KV arithmetic (vLLM's) applies to it, else None."""
    profile = seat.engine.profile
    return profile if profile is not None and requests_util(seat.engine) else None


def kv_cache_bytes(
    profile: Profile, *, pinned_bytes: int | None, util: Decimal | None, cuda_total: int
) -> int | None:
    """The KV cache vLLM allocates on one card: the pin, else its request less weights and non-KV.

    None when neither a pin nor a util says it (an unbounded seat: it grows into free memory).
    May be negative: the request does not even hold the weights.
    """
    if pinned_bytes is not None:
        return pinned_bytes
    if util is None:
        return None
    return leftover_kv_bytes(
        requested_bytes(util, cuda_total), profile.weights_bytes, profile.non_kv_bytes
    )


def kv_tokens(kv_bytes: int, kv_bytes_per_token: int) -> int:
    """floor(KV bytes / bytes per token): the tokens vLLM's cache holds (none when it is empty)."""
    return max(0, kv_bytes) // kv_bytes_per_token


def sequence_bytes(profile: Profile) -> int:
    """KV bytes one sequence of max_model_len takes on a card."""
    return profile.max_model_len * profile.kv_bytes_per_token


def util_target_bytes(seat: Seat) -> int:
    """The request a util must reach so that its KV cache holds one sequence (0: no such need).

    Only where the KV cache is the request's leftover: a pinned KV cache does not grow with util.
    """
    profile = profile_of(seat)
    if profile is None or seat.engine.kv_cache_bytes is not None:
        return 0
    return profile.weights_bytes + profile.non_kv_bytes + sequence_bytes(profile)


def graphs_outside_request_bytes(seat: Seat) -> int:
    """CUDA graphs the seat holds beyond vLLM's request (the profile's cuda_graphs, before 0.21).

    A util `plan` proposes leaves room for them inside the resident; 0 with a pinned KV cache,
    whose request does not size what the seat holds.
    """
    profile = profile_of(seat)
    if profile is None or seat.engine.kv_cache_bytes is not None:
        return 0
    return profile.cuda_graphs_bytes


def _profile_kv(seat: Seat, util: Decimal | None, cuda_total: int) -> tuple[Profile, int] | None:
    """The seat's profile and the KV bytes it gets on a card; None without a profile or a size."""
    profile = profile_of(seat)
    if profile is None:
        return None
    kv = kv_cache_bytes(
        profile, pinned_bytes=seat.engine.kv_cache_bytes, util=util, cuda_total=cuda_total
    )
    return None if kv is None else (profile, kv)


def profile_resident_bytes(
    seat: Seat, util: Decimal | None, cuda_total: int, cuda_context: int
) -> int | None:
    """weights + non_kv + KV bytes + cuda_graphs + cuda_context: what the profile says the seat
    holds on a card (the graphs of vLLM before 0.21 come on top of its request)."""
    found = profile_resident(seat, util, cuda_total, cuda_context)
    return None if found is None else found.total_bytes


# A resident part by part: (name, bytes), bytes None where not known.
Parts = tuple[tuple[str, int | None], ...]


@dataclass(frozen=True)
class ProfileResident:
    """What a profile says a seat holds on one card, part by part."""

    weights_bytes: int
    non_kv_bytes: int
    kv_bytes: int
    cuda_context_bytes: int
    cuda_graphs_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        """weights + non_kv + KV bytes + cuda_graphs + cuda_context (`resident_bytes`)."""
        return resident_bytes(
            weights=self.weights_bytes,
            non_kv=self.non_kv_bytes,
            kv=self.kv_bytes,
            cuda_context=self.cuda_context_bytes,
            cuda_graphs=self.cuda_graphs_bytes,
        )

    def parts(self) -> Parts:
        """(weights, non_kv, KV, cuda_context) by name, with cuda_graphs before the context
        where the profile has them (the edge writes `weights 7.42 GiB + non_kv …`)."""
        graphs = (("cuda_graphs", self.cuda_graphs_bytes),) if self.cuda_graphs_bytes else ()
        return (
            ("weights", self.weights_bytes),
            ("non_kv", self.non_kv_bytes),
            ("KV", self.kv_bytes),
            *graphs,
            ("cuda_context", self.cuda_context_bytes),
        )


def profile_resident(
    seat: Seat, util: Decimal | None, cuda_total: int, cuda_context: int
) -> ProfileResident | None:
    """The profile's resident on a card; None without a profile or a KV size (unbounded). A
    negative KV size (the request is below weights + non_kv) counts as none."""
    found = _profile_kv(seat, util, cuda_total)
    if found is None:
        return None
    profile, kv = found
    return ProfileResident(
        profile.weights_bytes,
        profile.non_kv_bytes,
        max(0, kv),
        cuda_context,
        profile.cuda_graphs_bytes,
    )


def profile_resident_warning(
    seat: Seat, util: Decimal | None, states: Sequence[CardState], cuda_context: int
) -> Note | None:
    """A declared resident below what the profile says the seat holds: both figures, and the parts."""
    worst: tuple[ProfileResident, int] | None = None
    for state in states:
        found = profile_resident(seat, util, state.cuda_total_bytes, cuda_context)
        if found is not None and (worst is None or found.total_bytes > worst[0].total_bytes):
            worst = (found, state.card.index)
    if worst is None or worst[0].total_bytes <= seat.resident_bytes:
        return None
    found, card = worst
    return note(
        "profile_resident",
        seat=seat.name,
        resident_bytes=seat.resident_bytes,
        total_bytes=found.total_bytes,
        card=card,
        parts=found.parts(),
    )


@dataclass(frozen=True)
class KvCapacity:
    """One card's KV figures for a seat with a profile."""

    kv_bytes: int
    tokens: int
    max_model_len: int
    kv_bytes_per_token: int

    @property
    def short_bytes(self) -> int:
        """KV bytes missing for one sequence (0 when it fits)."""
        return max(0, self.max_model_len * self.kv_bytes_per_token - max(0, self.kv_bytes))


def kv_capacity(seat: Seat, util: Decimal | None, cuda_total: int) -> KvCapacity | None:
    """The KV cache a seat gets on a card of CUDA total `cuda_total`; None without a profile or a size."""
    found = _profile_kv(seat, util, cuda_total)
    if found is None:
        return None
    profile, kv = found
    return KvCapacity(
        kv_bytes=kv,
        tokens=kv_tokens(kv, profile.kv_bytes_per_token),
        max_model_len=profile.max_model_len,
        kv_bytes_per_token=profile.kv_bytes_per_token,
    )


def kv_capacity_reason(
    *, seat: Seat, util: Decimal | None, state: CardState, host: str
) -> Reason | None:
    """Rule `kv_capacity`: floor(KV bytes / bytes per token) < max_model_len on this card."""
    found = kv_capacity(seat, util, state.cuda_total_bytes)
    if found is None:
        return _no_kv_reason(seat=seat, util=util, state=state, host=host)
    if found.tokens >= found.max_model_len:
        return None
    need = found.max_model_len * found.kv_bytes_per_token
    pinned = seat.engine.kv_cache_bytes is not None
    return Reason(
        rule="kv_capacity",
        card=state.card.index,
        need_bytes=need,
        room_bytes=found.kv_bytes,
        short_bytes=need - found.kv_bytes,
        host=host,
        said="kv_capacity",
        facts=facts(
            engine=engine_of(seat.engine).title,
            util=None if pinned else (format_util(util) if util is not None else "?"),
            tokens=found.tokens,
            kv_bytes_per_token=found.kv_bytes_per_token,
            max_model_len=found.max_model_len,
        ),
    )


def _no_kv_reason(
    *, seat: Seat, util: Decimal | None, state: CardState, host: str
) -> Reason | None:
    """Without a profile, a request that does not even hold the seat's weights (`weights`):
    vLLM sizes its KV cache as request − weights − non-KV, finds none, and stops at start ("No
    available memory for the cache blocks", vllm/v1/core/kv_cache_utils.py
    `check_enough_kv_cache_memory`): `--util 1e-9` asks 102 B of a 95 GiB card."""
    weights = seat.weights_bytes
    if util is None or weights is None or seat.engine.kv_cache_bytes is not None:
        return None
    if not requests_util(seat.engine):
        return None
    request = requested_bytes(util, state.cuda_total_bytes)
    if request >= weights:
        return None
    return Reason(
        rule="kv_capacity",
        card=state.card.index,
        need_bytes=weights,
        room_bytes=request,
        short_bytes=weights - request,
        host=host,
        said="kv_no_room",
        facts=facts(engine=engine_of(seat.engine).title, util=format_util(util)),
    )


def kv_fixes(seat: Seat, util: Decimal | None, state: CardState) -> list[Note]:
    """The nearest changes that pass `kv_capacity` on this card: the util, the KV bytes, the length.

    A util is named only where the KV cache is the request's leftover; a util that vLLM's
    gate on this card would refuse says so.
    """
    found = kv_capacity(seat, util, state.cuda_total_bytes)
    if found is None or found.tokens >= found.max_model_len:
        return []
    # util: the smallest util that holds them ("" where none does, None where the KV cache is
    # not the request's leftover); gate_refuses: this card's gate refuses that util.
    util_text: str | None = None
    gate_refuses = False
    target = util_target_bytes(seat)
    if target:
        better = smallest_util_covering(target, state.cuda_total_bytes)
        util_text = "" if better is None else format_util(better)
        gate_refuses = better is not None and not passes_gate(
            state.gate_free_bytes, requested_bytes(better, state.cuda_total_bytes)
        )
    return [
        note(
            "kv_fixes",
            card=state.card.index,
            util=util_text,
            gate_refuses=int(gate_refuses),
            max_model_len=found.max_model_len,
            kv_need_bytes=found.max_model_len * found.kv_bytes_per_token,
            tokens=found.tokens,
        )
    ]


def kv_need_floor(seat: Seat, cuda_context: int) -> int | None:
    """weights + KV + non_kv (+ cuda_graphs) + cuda_context, where the KV size is pinned.

    DESIGN.md "What fits": with a KV size set, a seat holds at least its weights (the profile's,
    else the catalogue's `weights`, else none known), that KV cache, its profiled non-KV bytes
    and its CUDA context. None where no KV size is pinned (the cache is the request's leftover).
    """
    kv = seat.engine.kv_cache_bytes
    if not requests_util(seat.engine) or kv is None:
        return None
    # A pinned KV size is the cache whatever the util and the card: neither is read.
    from_profile = profile_resident_bytes(seat, None, 0, cuda_context)
    if from_profile is not None:
        return from_profile
    return (seat.weights_bytes or 0) + kv + cuda_context


def _floor_parts(seat: Seat, cuda_context: int) -> Parts:
    """weights, KV and cuda_context (the profile's parts where it has one): the floor, part by
    part; weights None where none is known."""
    found = profile_resident(seat, None, 0, cuda_context)
    if found is not None:
        return found.parts()
    kv = seat.engine.kv_cache_bytes or 0
    return (("weights", seat.weights_bytes), ("KV", kv), ("cuda_context", cuda_context))


def seat_cuda_context(catalogue: Catalogue, seat: Seat) -> int:
    """The cuda_context of the seat's host; a seat that may go anywhere meets the costliest."""
    if seat.host is not None and seat.host in catalogue.hosts:
        return cuda_context_bytes(catalogue, seat.host)
    # Every host is described here: cuda_context_bytes would read the same figure, once a host.
    return max((host.cuda_context_bytes for host in catalogue.hosts.values()), default=0)


def need_floored(seat: Seat, cuda_context: int) -> tuple[Seat, Note | None]:
    """`seat` with its resident raised to `kv_need_floor` where the declared one is below it.

    DESIGN.md "What fits": the need of a seat with a KV size set is at least weights + KV +
    non_kv + cuda_context, as declared in the catalogue as much as when a flag sets it. Every
    rule reads the seat's resident, so the raise here serves the verifier, the planner and the
    check alike; a resident at or above its floor is returned unchanged, with no warning.
    """
    floor = kv_need_floor(seat, cuda_context)
    if floor is None or floor <= seat.resident_bytes:
        return seat, None
    why = _below_floor(seat, floor, cuda_context, named=True)
    return seat.model_copy(update={"resident_bytes": floor}), why


def _below_floor(seat: Seat, floor: int, cuda_context: int, *, named: bool = False) -> Note:
    """Why a declared resident is raised to its floor, with both figures and the parts (after
    the seat's name where `named`)."""
    return note(
        "below_floor",
        seat=seat.name if named else None,
        resident_bytes=seat.resident_bytes,
        floor_bytes=floor,
        parts=_floor_parts(seat, cuda_context),
    )


@dataclass(frozen=True)
class FlooredCatalogue:
    """The catalogue with every resident at least its need floor, and a warning per seat raised."""

    catalogue: Catalogue
    warnings: tuple[Note, ...]


def with_need_floors(catalogue: Catalogue) -> FlooredCatalogue:
    """The catalogue with every seat `need_floored` on its host, and a warning per seat raised."""
    seats: list[Seat] = []
    warnings: list[Note] = []
    for seat in catalogue.seats:
        floored, warning = need_floored(seat, seat_cuda_context(catalogue, seat))
        seats.append(floored)
        warnings += [warning] if warning else []
    if not warnings:
        return FlooredCatalogue(catalogue, ())
    return FlooredCatalogue(catalogue.model_copy(update={"seats": tuple(seats)}), tuple(warnings))


@dataclass(frozen=True)
class FlagResident:
    """The resident a seat holds once flags (or a compose command) change it, and why."""

    resident_bytes: int
    why: Note | None


def flag_resident(
    declared: Seat, judged: Seat, cuda_context: int, *, resident_given: bool
) -> FlagResident:
    """The resident of `judged` (the catalogue's `declared` seat with flags put in).

    A new KV size changes the resident by what it changes: declared resident − declared KV +
    new KV (a resident given with --resident stands as given). The resident is never below
    weights + KV + non_kv + cuda_context (`kv_need_floor`), whether a flag, the command or the
    catalogue set the KV size.
    """
    resident = judged.resident_bytes
    old, new = declared.engine.kv_cache_bytes, judged.engine.kv_cache_bytes
    changed = new is not None and new != old
    why: Note | None = None
    if changed and not resident_given and old is not None and new is not None:
        resident = resident - old + new
        why = note(
            "kv_changed",
            kv_bytes=new,
            declared_kv_bytes=old,
            declared_bytes=declared.resident_bytes,
            resident_bytes=resident,
        )
    floor = kv_need_floor(judged, cuda_context)
    if floor is not None and floor > resident and not (changed or resident_given):
        return FlagResident(floor, _below_floor(judged, floor, cuda_context))
    if floor is not None and floor > resident:
        why = note(
            "floor_raised",
            floor_bytes=floor,
            parts=_floor_parts(judged, cuda_context),
            resident_bytes=resident,
        )
        resident = floor
    return FlagResident(resident, why)
