"""`plan --window`: seats placed against each card's window room, the exact replay deciding.

The solver proposes on the cards lowered to their window room at the percentile
(`placement.fit.week.window_model`); the verifier judges the proposal at the window's end, and
the replay (`placement.fit.week.replay`) judges it at every moment, the seats of one host
together. A seat the replay refuses is taken off (the least important first) and, like every
seat left out, tried on its next placements, widest window room first, until one holds at the
end and over the window; a seat none holds for is shown refused by the window's rules on its
widest placement. No I/O of its own: the command opens the history and hands it in.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placement.fit.verdict import Verdict
from placement.fit.verify import Placement, verify_placement
from placement.fit.week import CardWindow, SeatWindow, WindowRules, window_model
from placement.fit.week.prune import open_windows_history, replay_history
from placement.fit.week.windowed import WindowOptions, combined, judged_seat
from placement.plan.problem import NewSeat as PlanSeat
from placement.plan.problem import Problem, build_problem

# Placements tried per seat after the solver's (each one a verification and a replay).
MAX_TRIES = 24


@dataclass
class Settled:
    """The placements that hold at the end and over the window, and what is shown for each seat.

    `ends`: the verifier's passing verdicts of `placements`; `shown`: the verdict of every seat
    the window judged (placed: the end's with the window's status; refused by the window: the
    end's pass on its widest placement, refused by the window's reasons); `windows`: each of
    those seats' window.
    """

    placements: list[Placement]
    ends: list[Verdict]
    shown: dict[str, Verdict] = field(default_factory=dict)
    windows: dict[str, SeatWindow] = field(default_factory=dict)


@dataclass(frozen=True)
class WindowPlan:
    """What `plan --window` adds to `plan`: the history each host's window is read from (the
    command opens it; `inventory.history`, rollups first where it keeps them) and the settings."""

    settings: WindowOptions
    history: Any  # inventory.history: moments, rollups (and moment_times where it keeps them)

    def rules(self, problem: Problem, host: str) -> WindowRules:
        return self.settings.rules(problem.snapshot(host).taken_at)

    def card_windows(self, problem: Problem) -> dict[tuple[str, int], CardWindow]:
        """Each usable card's window for a seat nothing names (room now, at the percentile), on
        the hosts some planned seat may use (no other card is proposed on or tried)."""
        wanted = {host for new in problem.seats for host in problem.eligible_hosts(new.name)}
        out: dict[tuple[str, int], CardWindow] = {}
        for snapshot in problem.snapshots:
            if snapshot.host not in wanted:
                continue
            rules = self.rules(problem, snapshot.host)
            found = open_windows_history(problem.catalogue, snapshot, self.history, rules)
            for window in (card for seat in found for card in seat.cards):
                out[(snapshot.host, window.card)] = window
        return out

    def proposing(self, problem: Problem, windows: Mapping[tuple[str, int], CardWindow]) -> Problem:
        """The problem the solver places on: every card lowered to its window room."""
        models = {
            key: window_model(model, windows[key]) if key in windows else model
            for key, model in problem.models.items()
        }
        return build_problem(
            problem.catalogue, problem.snapshots, problem.seats, attributed=True, models=models
        )

    def settle(
        self,
        problem: Problem,
        placements: Sequence[Placement],
        ends: Sequence[Verdict],
        windows: Mapping[tuple[str, int], CardWindow],
    ) -> Settled:
        """The proposal (`placements`, passed at the end as `ends`) judged over the window;
        refused seats off, every seat left out tried on its next placements (highest priority
        first)."""
        kept = list(placements)
        judged = self._judge(problem, kept)
        while judged is not None and (refused := _refused(kept, judged[1])):
            worst = min(refused, key=lambda p: (p.seat.priority, -p.seat.resident_bytes))
            kept = [p for p in kept if p is not worst]
            judged = self._judge(problem, kept)
        if judged is None:  # the end's verifier refuses what it passed before: keep the end's
            return Settled(list(placements), list(ends))
        settled = Settled(kept, judged[0], {}, dict(judged[1]))
        placed = {p.seat.name for p in kept}
        waiting = [new for new in problem.seats if new.name not in placed]
        for new in sorted(waiting, key=lambda n: (-n.seat.priority, -n.seat.resident_bytes)):
            self._try_next(problem, new, settled, windows)
        by_end = {v.seat: v for v in settled.ends}
        for name, window in settled.windows.items():
            if name in by_end:
                settled.shown[name] = combined(by_end[name], window)
        return settled

    def _try_next(
        self,
        problem: Problem,
        new: PlanSeat,
        settled: Settled,
        windows: Mapping[tuple[str, int], CardWindow],
    ) -> None:
        """Place `new` on its first candidate that holds at the end and over the window; else
        keep the first the window alone refused, to show why."""
        refusal: tuple[Verdict, SeatWindow] | None = None
        for candidate in itertools.islice(_candidates(problem, new, windows), MAX_TRIES):
            trial = [*settled.placements, candidate]
            judged = self._judge(problem, trial)
            if judged is None:
                continue
            ends, seat_windows = judged
            if not _refused(trial, seat_windows):
                settled.placements = trial
                settled.ends = ends
                settled.windows.update(seat_windows)
                return
            if refusal is None:
                mine = next(v for v in ends if v.seat == new.name)
                if new.name in seat_windows and seat_windows[new.name].status == "refuse":
                    refusal = (mine, seat_windows[new.name])
        if refusal is not None:
            verdict, window = refusal
            settled.shown[new.name] = combined(verdict, window)
            settled.windows[new.name] = window

    def _judge(
        self, problem: Problem, placements: Sequence[Placement]
    ) -> tuple[list[Verdict], dict[str, SeatWindow]] | None:
        """The verifier at the end, then the replay of each host's placed seats together; None
        when the end refuses any of them."""
        if not placements:
            return [], {}
        ends = verify_placement(
            problem.catalogue,
            problem.snapshots,
            placements,
            views=problem.host_catalogues,
            card_views=problem.card_catalogues,
            models=problem.models,
        )
        if not all(v.passed for v in ends):
            return None
        by_host: dict[str, list[tuple[Placement, Verdict]]] = {}
        for placement, verdict in zip(placements, ends, strict=True):
            by_host.setdefault(placement.host, []).append((placement, verdict))
        out: dict[str, SeatWindow] = {}
        for host, pairs in by_host.items():
            seats = [judged_seat(p.seat, v) for p, v in pairs]
            found = replay_history(
                problem.catalogue,
                problem.snapshot(host),
                self.history,
                seats,
                self.rules(problem, host),
            )
            out.update({w.seat: w for w in found})
        return ends, out


def _refused(placements: Sequence[Placement], windows: Mapping[str, SeatWindow]) -> list[Placement]:
    return [
        p for p in placements if p.seat.name in windows and windows[p.seat.name].status == "refuse"
    ]


def _candidates(
    problem: Problem, new: PlanSeat, windows: Mapping[tuple[str, int], CardWindow]
) -> list[Placement]:
    """The seat's placements on its eligible cards, widest window room first: for a multi-card
    seat, combinations of one host's cards, by their narrowest card."""
    seat = new.seat
    ranked: list[tuple[tuple[int, str, tuple[int, ...]], Placement]] = []
    for host in problem.eligible_hosts(new.name):
        cards = [
            slot.index
            for slot in problem.hosts[host]
            if slot.ok and problem.pair(new.name, host, slot.index) is not None
        ]
        width = {index: _room(windows.get((host, index))) for index in cards}
        cards.sort(key=lambda index: (-width[index], index))
        combos = itertools.islice(itertools.combinations(cards, seat.card_count), MAX_TRIES)
        for chosen in combos:
            key = (-min(width[i] for i in chosen), host, tuple(sorted(chosen)))
            ranked.append((key, Placement(seat, host, key[2])))
    ranked.sort(key=lambda item: item[0])
    return [placement for _, placement in ranked]


def _room(window: CardWindow | None) -> int:
    if window is None or window.percentile_room_bytes is None:
        return 0
    return window.percentile_room_bytes
