"""The one door to the solvers: PuLP (HiGHS, CBC) for the integer programs, highspy for an LP.

Models are written against `Model`, `linear` and `total`; how a solver is configured, held to
its time limit, warm-started and kept off stdout is decided here and nowhere else. HiGHS, the
default, runs in this process and stops at its own time limit; CBC runs as PuLP's subprocess
and watches its limit only between search nodes.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import highspy
import numpy as np
import pulp

from seats.errors import CannotDecideError

SolverName = Literal["cbc", "highs"]
SOLVERS: tuple[SolverName, ...] = ("cbc", "highs")
# Every HiGHS asks for this many threads: HiGHS keeps one scheduler per process, sized by the
# first solve, and answers kError without solving when a later one asks for another size.
HIGHS_THREADS = 1

# A model variable: numbers and other variables combine with it by + − ×, and ≤ ≥ == make rows.
Var: TypeAlias = Any
# A linear expression over variables, or a row (an expression compared with a number).
Expr: TypeAlias = Any

# How a model ended, and what kind of solution it left.
ModelStatus = Literal["optimal", "not solved", "infeasible", "unbounded", "undefined"]
SolutionStatus = Literal["optimal", "feasible", "none", "infeasible", "unbounded"]


class SolverError(CannotDecideError):
    """The solver ended in a status we cannot read an answer from (exit 3)."""


class Model:
    """A linear or integer program under construction: variables, named rows, an objective."""

    def __init__(self, name: str, *, maximise: bool = False) -> None:
        self._lp = pulp.LpProblem(name, pulp.LpMaximize if maximise else pulp.LpMinimize)

    def binary(self, name: str) -> Var:
        """A new 0/1 variable."""
        return self._lp.add_variable(name, cat=pulp.LpBinary)

    def variable(
        self,
        name: str,
        low: float | None = None,
        up: float | None = None,
        *,
        integer: bool = False,
    ) -> Var:
        """A new variable in [low, up] (None: unbounded on that side), integer or continuous."""
        cat = pulp.LpInteger if integer else pulp.LpContinuous
        return self._lp.add_variable(name, lowBound=low, upBound=up, cat=cat)

    def add(self, row: Expr, name: str | None = None) -> None:
        """Add a row (`expression <= number` and the like), named or numbered by the solver."""
        if name is None:
            self._lp += row
        else:
            self._lp += row, name

    def objective(self, expression: Expr) -> None:
        """Set what the solver maximises or minimises."""
        self._lp += expression

    @property
    def variables(self) -> int:
        """How many variables the rows and the objective use."""
        return int(self._lp.numVariables())

    @property
    def constraints(self) -> int:
        """How many rows."""
        return int(self._lp.numConstraints())

    def objective_value(self) -> float | None:
        """The objective at the solution read back; None before a solve or without one."""
        value = pulp.value(self._lp.objective)
        return None if value is None else float(value)


def linear(terms: Iterable[tuple[Var, float]]) -> Expr:
    """Σ coefficient·variable from (variable, coefficient) pairs.

    Built in one call rather than by operator overloading, which is far too slow at fleet size
    (bench/bench_plan.py).
    """
    return pulp.LpAffineExpression(list(terms))


def total(items: Iterable[Var | Expr | float]) -> Expr:
    """The sum of variables, expressions and numbers."""
    return pulp.lpSum(items)


def value_of(var: Var) -> float | None:
    """A variable's value in the solution read back; None where the solver gave none."""
    value = var.varValue
    return None if value is None else float(value)


def reduced_cost(var: Var) -> float | None:
    """A variable's reduced cost in an LP's solution; None where the solver gave none."""
    cost = var.dj
    return None if cost is None else float(cost)


@dataclass(frozen=True)
class Settings:
    """How one model is solved: which solver, its own time limit, gaps, and CBC's switches.

    `presolve` and `preprocess` switch CBC's presolve and its preprocessing of integer rows;
    `primal_simplex` makes CBC solve an LP by primal simplex. HiGHS runs with its defaults,
    always on `HIGHS_THREADS` threads. CBC is never given a thread count (see `command`).
    """

    solver: SolverName
    time_limit: float
    mip: bool = True
    gap_rel: float | None = None
    gap_abs: float | None = None
    presolve: bool = True
    preprocess: bool = True
    primal_simplex: bool = False


@dataclass(frozen=True)
class Outcome:
    """How a solve ended: the statuses the solver left."""

    status: ModelStatus
    solution: SolutionStatus
    mip_gap: float | None  # the relative MIP gap HiGHS reports; None from CBC


Stdout = Literal["dropped", "stderr"]


def solve(
    model: Model,
    settings: Settings,
    *,
    start: Sequence[tuple[Var, float]] = (),
    stdout: Stdout = "dropped",
) -> Outcome:
    """Solve `model`; the values are then read with `value_of` and `reduced_cost`.

    `start` (variable, value) pairs are a MIP start: CBC gets every value as its first
    incumbent, HiGHS the partial point to complete. HiGHS stops at `settings.time_limit`
    (it runs in this process and checks its clock throughout); CBC may overrun its limit
    while it reads a large model or runs its root LP (docs/how-it-works.md).
    Whatever the solver prints on stdout is dropped or sent to stderr, as `stdout` says.
    A solver failure raises SolverError.
    """
    if settings.solver == "cbc":
        for var, value in start:
            var.setInitialValue(value)
    redirect = _stdout_silenced if stdout == "dropped" else _stdout_to_stderr
    try:
        with redirect():
            model._lp.solve(command(settings, start=start))
    except pulp.PulpSolverError as exc:
        raise SolverError(f"{settings.solver} failed: {exc}") from exc
    lp = model._lp
    return Outcome(
        _STATUS.get(lp.status, "undefined"),
        _SOLUTION.get(lp.sol_status, "none"),
        _mip_gap(lp) if settings.solver == "highs" else None,
    )


_STATUS: dict[int, ModelStatus] = {
    pulp.LpStatusOptimal: "optimal",
    pulp.LpStatusNotSolved: "not solved",
    pulp.LpStatusInfeasible: "infeasible",
    pulp.LpStatusUnbounded: "unbounded",
    pulp.LpStatusUndefined: "undefined",
}
_SOLUTION: dict[int, SolutionStatus] = {
    pulp.LpSolutionOptimal: "optimal",
    pulp.LpSolutionIntegerFeasible: "feasible",
    pulp.LpSolutionNoSolutionFound: "none",
    pulp.LpSolutionInfeasible: "infeasible",
    pulp.LpSolutionUnbounded: "unbounded",
}


def command(settings: Settings, *, start: Sequence[tuple[Var, float]] = ()) -> Any:
    """The PuLP solver object for `settings` (msg off; a MIP start where `start` is given)."""
    if settings.solver == "cbc":
        options = [] if settings.preprocess else ["preprocess off"]
        if settings.primal_simplex:
            options.append("primalS")
        with warnings.catch_warnings():
            # PuLP 3.3 calls its bundled CBC deprecated in favour of 4.x packaging; it is the one we pin.
            warnings.simplefilter("ignore", DeprecationWarning)
            return pulp.PULP_CBC_CMD(
                msg=False,
                mip=settings.mip,
                timeLimit=settings.time_limit,
                gapRel=settings.gap_rel,
                gapAbs=settings.gap_abs,
                presolve=None if settings.presolve else False,
                # No `threads`: any value turns on CBC 2.10's threaded search, whose start-up
                # race sometimes leaves a 17-row model waiting out the whole time limit
                # ("Thread 0 used 0 times, waiting to start 10.0"): 1 run in 100 on a loaded
                # 2-core machine. Unthreaded, 400 runs of the same model under load each took
                # under 1 s.
                warmStart=bool(start),
                options=options,
            )
    if settings.solver == "highs":
        return _WarmHiGHS(
            start=list(start),
            msg=False,
            mip=settings.mip,
            timeLimit=settings.time_limit,
            gapRel=settings.gap_rel,
            gapAbs=settings.gap_abs,
            threads=HIGHS_THREADS,
        )
    raise ValueError(f"unknown solver {settings.solver!r}; choose one of {', '.join(SOLVERS)}")


class _WarmHiGHS(pulp.HiGHS):  # type: ignore[misc]
    """PuLP's HiGHS interface, plus a partial MIP start (HiGHS completes the continuous part)."""

    def __init__(self, *, start: list[tuple[Var, float]], **options: Any) -> None:
        super().__init__(**options)
        self.start = start

    def callSolver(self, lp: Any) -> None:
        if self.start:
            index = np.array([var.index for var, _ in self.start], dtype=np.int32)
            value = np.array([float(v) for _, v in self.start], dtype=np.float64)
            lp.solverModel.setSolution(len(self.start), index, value)
        lp.solverModel.run()


def _mip_gap(lp: Any) -> float | None:
    """The relative MIP gap HiGHS reports for its last solve, where it reports one."""
    model = getattr(lp, "solverModel", None)
    try:
        return float(model.getInfo().mip_gap) if model is not None else None
    except Exception:  # a solver interface without the figure: say nothing rather than fail
        return None


@dataclass(frozen=True)
class LpAnswer:
    """An LP's optimum as HiGHS left it: objective, row duals and column values."""

    value: float
    row_duals: Sequence[float]
    column_values: Sequence[float]


class ColumnLp:
    """min Σ_j λ_j  s.t.  Σ_j a_ij·λ_j ≥ lower_i,  λ ≥ 0, grown column by column (highspy).

    The rows' lower bounds change in place and each solve starts from the last basis, as
    column generation and its dives need.
    """

    def __init__(self, lower: Sequence[float]) -> None:
        self._inf = highspy.kHighsInf
        self._error = highspy.HighsStatus.kError
        with _stdout_silenced():  # its banner, printed before any option can be set
            self._highs = highspy.Highs()  # type: ignore[no-untyped-call]
        self._highs.setOptionValue("output_flag", False)
        self._highs.setOptionValue("threads", HIGHS_THREADS)
        n = len(lower)
        self._highs.addRows(
            n,
            np.array(lower, dtype=np.float64),
            np.full(n, self._inf),
            0,
            np.zeros(1, dtype=np.int32),
            np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.float64),
        )

    def add_column(self, rows: np.ndarray, values: np.ndarray) -> None:
        """A column of cost 1 with `values` (float64) in `rows` (int32)."""
        self._highs.addCol(1.0, 0.0, 1e30, len(rows), rows, values)

    def set_lower(self, row: int, lower: float) -> None:
        """A row's new lower bound; the basis is kept for a warm start."""
        self._highs.changeRowBounds(row, lower, self._inf)

    def solve(self) -> LpAnswer:
        """Solve from the current basis; SolverError when HiGHS refuses to.

        HiGHS answers kError without solving when its scheduler was started with another
        thread count (`HIGHS_THREADS`): that is never read as a bound.
        """
        if self._highs.run() == self._error:
            raise SolverError("HiGHS refused to solve the column-generation master LP")
        solution = self._highs.getSolution()
        return LpAnswer(
            float(self._highs.getInfo().objective_function_value),
            solution.row_dual,
            solution.col_value,
        )


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr for the block (docs/facts.md §4: PuLP's HiGHS, highspy)."""
    with _stdout_to(2):
        yield


@contextmanager
def _stdout_silenced() -> Iterator[None]:
    """Point file descriptor 1 at /dev/null for the block: a banner nobody needs to read.

    HiGHS prints one on stdout even when told to be quiet, and `--json` output must stay one
    JSON document.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with _stdout_to(devnull):
            yield
    finally:
        os.close(devnull)


@contextmanager
def _stdout_to(fd: int) -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(fd, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
