"""The solver door: CBC's and HiGHS's settings, HiGHS's own time limit, MIP starts, statuses, banners,
and the column-generation LP after a PuLP HiGHS solve in the same process."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from placement import solvers
from placement.pack import column_generation as pack_cg
from placement.solvers import Model, Settings, linear, total, value_of

ROOT = Path(__file__).resolve().parents[2]


def market_split(rows: int = 4, columns: int = 30, seed: int = 1) -> Model:
    """Cornuéjols and Dawande's market split: tiny, and seconds of CBC branching to prove."""
    rng = random.Random(seed)
    model = Model("market_split")
    x = [model.binary(f"x{j}") for j in range(columns)]
    slack = []
    for i in range(rows):
        weights = [rng.randint(0, 99) for _ in range(columns)]
        over, under = model.variable(f"over{i}", 0), model.variable(f"under{i}", 0)
        slack += [over, under]
        terms = [(var, float(w)) for var, w in zip(x, weights, strict=True)]
        model.add(linear([*terms, (over, 1.0), (under, -1.0)]) == sum(weights) // 2, f"split{i}")
    model.objective(total(slack))
    return model


def knapsack(seed: int = 7) -> tuple[Model, list[solvers.Var], solvers.Var, list[int]]:
    """max Σ v_j·x_j s.t. Σ w_j·x_j + spare = 500: the model, x, the continuous spare, w."""
    rng = random.Random(seed)
    model = Model("knapsack", maximise=True)
    x = [model.binary(f"x{j}") for j in range(40)]
    weights = [rng.randint(10, 60) for _ in range(40)]
    spare = model.variable("spare", 0)
    model.add(
        linear([*((v, float(w)) for v, w in zip(x, weights, strict=True)), (spare, 1.0)]) == 500
    )
    model.objective(
        linear([(v, float(w + rng.randint(0, 5))) for v, w in zip(x, weights, strict=True)])
    )
    return model, x, spare, weights


@pytest.mark.parametrize(
    "settings",
    [
        # The placement model's two CBC configurations, and the arc-flow program's and LP's.
        Settings("cbc", 5.0, gap_rel=1e-7, gap_abs=0.01, preprocess=True),
        Settings("cbc", 5.0, gap_rel=1e-7, gap_abs=0.9, preprocess=False),
        Settings("cbc", 5.0, presolve=False),
        Settings("cbc", 5.0, mip=False, primal_simplex=True),
    ],
)
def test_cbc_runs_unthreaded(settings: Settings) -> None:
    # Any `-threads` turns on CBC 2.10's threaded search, whose start-up race made the fv-ml1
    # 6 GiB plan (17 rows) wait out its 10 s limit about once in 100 runs on a loaded machine.
    model = Model("m")
    command = solvers.command(settings, start=[(model.binary("a"), 1)])
    options = command.getOptions() + command.options
    assert not [o for o in options if o.startswith("threads")]
    assert "timeMode elapsed" in command.getOptions()


def test_cbc_switches_reach_the_command() -> None:
    assert "preprocess off" in solvers.command(Settings("cbc", 1.0, preprocess=False)).options
    assert "preprocess off" not in solvers.command(Settings("cbc", 1.0)).options
    assert (
        "primalS" in solvers.command(Settings("cbc", 1.0, mip=False, primal_simplex=True)).options
    )
    assert solvers.command(Settings("cbc", 1.0, presolve=False)).optionsDict["presolve"] is False
    assert solvers.command(Settings("cbc", 1.0)).optionsDict.get("presolve") is None


@pytest.mark.parametrize("mip", [True, False])
def test_every_highs_asks_for_one_thread(mip: bool) -> None:
    assert solvers.command(Settings("highs", 1.0, mip=mip)).threads == solvers.HIGHS_THREADS == 1


def test_an_unknown_solver_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown solver 'glpk'; choose one of cbc, highs"):
        solvers.command(Settings("glpk", 1.0))  # type: ignore[arg-type]


@pytest.mark.parametrize("solver", ["cbc", "highs"])
def test_a_mip_start_is_the_answer_when_no_time_is_left(solver: solvers.SolverName) -> None:
    # With no time to search, the answer is the start: CBC's first incumbent, and for HiGHS a
    # partial point (the binaries) it completes with the continuous `spare`.
    model, x, spare, weights = knapsack()
    assert solvers.solve(model, Settings(solver, 0.0)).solution == "none"
    start = [(var, 1 if j < 5 else 0) for j, var in enumerate(x)]
    outcome = solvers.solve(model, Settings(solver, 0.0), start=start)
    assert outcome.solution == "feasible"
    assert [value_of(var) for var in x] == [1.0] * 5 + [0.0] * 35
    assert value_of(spare) == pytest.approx(500 - sum(weights[:5]))


@pytest.mark.parametrize("solver", ["cbc", "highs"])
def test_statuses_of_an_infeasible_and_an_optimal_model(solver: solvers.SolverName) -> None:
    model = Model("infeasible")
    a = model.binary("a")
    model.add(a >= 2, "impossible")
    model.objective(a)
    assert solvers.solve(model, Settings(solver, 5.0)).status == "infeasible"
    model, *_ = knapsack()
    outcome = solvers.solve(model, Settings(solver, 5.0))
    assert (outcome.status, outcome.solution) == ("optimal", "optimal")
    assert model.objective_value() is not None and model.objective_value() > 0
    assert (model.variables, model.constraints) == (41, 1)


def test_highs_then_the_column_generation_lp_in_one_process() -> None:
    # A PuLP HiGHS solve starts HiGHS's scheduler; the column-generation master solved after it
    # must still be solved (sizes 6, 5, 4 twice each in bins of 10: LP optimum 3).
    model, *_ = knapsack()
    assert solvers.solve(model, Settings("highs", 5.0)).solution == "optimal"
    _, root = pack_cg.root_lp([6, 5, 4], [2, 2, 2], 10, deadline=time.perf_counter() + 30)
    assert root is not None and root.value == pytest.approx(3.0)
    assert pack_cg.dual_bound([6, 5, 4], [2, 2, 2], 10, root.duals).bins == 3


@pytest.mark.slow
def test_a_highs_that_refuses_to_solve_is_an_error_not_a_bound() -> None:
    # HiGHS answers kError unsolved when its scheduler was started with another thread count;
    # in a fresh process, a PuLP HiGHS on 2 threads first, then the master LP on 1.
    script = textwrap.dedent(
        """
        from placement import solvers
        from placement.pack import column_generation as pack_cg
        from tests.placement.test_solvers import knapsack
        solvers.HIGHS_THREADS = 2
        solvers.solve(knapsack()[0], solvers.Settings("highs", 5.0))
        solvers.HIGHS_THREADS = 1
        try:
            pack_cg.root_lp([6, 5, 4], [2, 2, 2], 10, deadline=1e18)
        except solvers.SolverError as exc:
            print("SolverError:", exc)
        else:
            print("solved")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=True,
    )
    assert done.stdout.strip() == (
        "SolverError: HiGHS refused to solve the column-generation master LP"
    )


def test_solver_output_is_dropped_or_sent_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with solvers._stdout_silenced():
        os.write(1, b"banner one\n")
    with solvers._stdout_to_stderr():
        os.write(1, b"banner two\n")
    os.write(1, b"ours\n")
    out, err = capfd.readouterr()
    assert out == "ours\n"
    assert err == "banner two\n"
