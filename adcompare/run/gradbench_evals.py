"""GradBench's evals as adcompare sees them: one table from each eval's functions to the problem and operator that
compute them, and to the layout of GradBench's output (each eval's README, "Outputs", and its golden tool,
cpp/gradbench/evals/<eval>.hpp, at gradbench/gradbench commit f26651a7).

The inputs need no table: an evaluate message's `input` is the JSON object that the problem's `--inputs` reader
reads (problems/json_inputs.py), so the tool hands it to that reader. The outputs do: adcompare's operators return
arrays in the problem's shapes, GradBench wants its own (a gmm gradient split into alpha, mu, q, l; ba's Jacobian
as the head of ADBench's compressed sparse rows; ht's with each point's own `us` columns only). Each layout is a
NumPy function of the operator's result and GradBench's input, so that the numbers GradBench sees are the
framework's, rearranged, never recomputed.
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from adcompare.model.problem import Problem

Layout = Callable[[np.ndarray, Mapping[str, Any]], Any]  # (the operator's result, GradBench's input) → JSON value

BA_CAMERA = 11  # ADBench's BA_NCAMPARAMS
BA_BLOCK = BA_CAMERA + 3 + 1  # one reprojection row's non-zeros: camera, point, weight
BA_HEAD = 2 * BA_BLOCK  # GradBench sends the first 30 entries of each list, then the last (evals/ba/README.md)


def number(result: np.ndarray, _: Mapping[str, Any]) -> float:
    """A scalar (a value, or the one-element result of a nested operator on a one-parameter problem)."""
    return float(np.asarray(result).reshape(-1)[0]) if np.size(result) == 1 else _not_scalar(result)


def _not_scalar(result: np.ndarray) -> float:
    raise ValueError(f"expected one number, got an array of shape {np.shape(result)}")


def flat(result: np.ndarray, _: Mapping[str, Any]) -> list[float]:
    """The result's entries in row-major order (det's ℓ × ℓ gradient as GradBench's ℓ² list, lstm's (8l+3, b)
    gradient as main_params then extra_params, each row-major)."""
    return np.asarray(result, dtype=np.float64).reshape(-1).tolist()


def rows(result: np.ndarray, _: Mapping[str, Any]) -> list[list[float]]:
    """A matrix as a list of rows (kmeans's dir, k rows of d)."""
    return np.asarray(result, dtype=np.float64).tolist()


def gmm_gradient(result: np.ndarray, data: Mapping[str, Any]) -> dict[str, Any]:
    """gmm_posterior's gradient, (k, 1 + d + d + d(d−1)/2) rows of [alpha | mu | q | l] (the reader's layout), as
    GradBench's Independent: alpha (k), mu, q (k rows of d), l (k rows of d(d−1)/2)."""
    d = int(data["d"])
    g = np.asarray(result, dtype=np.float64)
    return {"alpha": g[:, 0].tolist(), "mu": g[:, 1:1 + d].tolist(), "q": g[:, 1 + d:1 + 2 * d].tolist(),
            "l": g[:, 1 + 2 * d:].tolist()}


def ba_objective(result: np.ndarray, data: Mapping[str, Any]) -> dict[str, Any]:
    """bundle_adjustment's residuals, (p, 3) rows of [reprojection (2) | weight error], as GradBench's
    BAObjectiveOutput: the first observation's and a count, since GradBench's p observations repeat one (its tools
    and golden send the same)."""
    r = np.asarray(result, dtype=np.float64)
    return {"reproj_error": {"elements": r[0, :2].tolist(), "repeated": int(r.shape[0])},
            "w_err": {"element": float(r[0, 2]), "repeated": int(r.shape[0])}}


def ba_jacobian(result: np.ndarray, data: Mapping[str, Any]) -> dict[str, list]:
    """The (p, 3, 15) blocks ∂rᵢ/∂θᵢ (θᵢ = [camera | point | weight]), the Jacobian of every residual with respect
    to the shift δ shared by all observations (15 forward passes over the whole batch: the column-compressed
    sparse Jacobian; a per-example loop would cost p passes where a framework has no vmap), as ADBench's sparse BA
    Jacobian (BASparseMat: the 2p reprojection rows of 15 non-zeros each, observation by observation, then the p
    weight rows of one), cut as GradBench cuts its three lists: the first 30 entries and the last. Observation i
    sees camera i mod n and point i mod m (GradBench's evals/ba/run.py and ADBench's reader)."""
    blocks = np.asarray(result, dtype=np.float64)
    n, m, p = int(data["n"]), int(data["m"]), blocks.shape[0]
    weight_column = BA_CAMERA * n + 3 * m  # + observation index
    first_columns = [*range(BA_CAMERA), *(BA_CAMERA * n + k for k in range(3)), weight_column]
    cols = (first_columns * 2)[:BA_HEAD] + [weight_column + p - 1]
    vals = [*blocks[0, 0, :].tolist(), *blocks[0, 1, :].tolist()][:BA_HEAD] + [float(blocks[-1, 2, -1])]
    offsets = [BA_BLOCK * i if i <= 2 * p else BA_HEAD * p + (i - 2 * p) for i in range(min(BA_HEAD, 3 * p + 1))]
    return {"rows": offsets + [(BA_HEAD + 1) * p], "cols": cols, "vals": vals}


def ht_jacobian(result: np.ndarray, data: Mapping[str, Any]) -> list[list[float]]:
    """ht's dense (3c, parameters) Jacobian as GradBench's: for the simple variant the same rows; for the
    complicated one (parameters [us (2c) | θ (26)]) each residual row keeps its own point's 2 us columns, then θ's
    26, as its golden tool writes it (ht.hpp's JacOutput)."""
    dense = np.asarray(result, dtype=np.float64)
    if not data.get("us"):
        return dense.tolist()
    c = dense.shape[0] // 3
    us = dense[:, :2 * c].reshape(c, 3, c, 2)
    own = us[np.arange(c), :, np.arange(c), :].reshape(3 * c, 2)  # each point's rows against its own us
    return np.concatenate([own, dense[:, 2 * c:]], axis=1).tolist()


def whole_ode_solution(problem: Problem) -> Problem:
    """ode with the whole solution vector y(2) as its value, GradBench's `primal` (the same integration: the
    problem's value is its last entry, whose gradient is GradBench's `gradient`), from the `ode_solution` of the
    module that defines the registered problem."""
    solution = importlib.import_module(problem.function.__module__).ode_solution

    def ode_vector(x, /, *, steps, xp):
        return solution(x, steps, xp)

    return dataclasses.replace(problem, function=ode_vector, name="ode_solution")


@dataclass(frozen=True)
class Function:
    """One function of an eval: the operator that computes it, and the layout of GradBench's output."""

    operator: str
    layout: Layout
    problem: Callable[[Problem], Problem] | None = None  # the problem to apply it to, where not the eval's own


@dataclass(frozen=True)
class Eval:
    problem: str  # the adcompare problem that reproduces the eval
    functions: Mapping[str, Function]


PRIMAL_GRADIENT = {"primal": Function("value", number), "gradient": Function("grad", flat)}
NESTED_ORDERS = ("ff", "fr", "rf", "rr")  # outer mode, then inner (adcompare's nested_ff … nested_rr)

EVALS: dict[str, Eval] = {
    "lse": Eval("lse", PRIMAL_GRADIENT),
    "llsq": Eval("llsq", PRIMAL_GRADIENT),
    "det": Eval("det", PRIMAL_GRADIENT),
    "ode": Eval("ode", {"primal": Function("value", flat, whole_ode_solution), "gradient": Function("grad", flat)}),
    "kmeans": Eval("kmeans", {"cost": Function("value", number), "dir": Function("newton_dir", rows)}),
    "gmm": Eval("gmm_posterior", {"objective": Function("value", number),
                                  "jacobian": Function("grad", gmm_gradient)}),
    "ba": Eval("bundle_adjustment", {"objective": Function("value", ba_objective),
                                     "jacobian": Function("jacfwd", ba_jacobian)}),
    "ht": Eval("ht", {"objective": Function("value", flat), "jacobian": Function("jacfwd", ht_jacobian)}),
    "lstm": Eval("lstm", {"objective": Function("value", number), "jacobian": Function("grad", flat)}),
    "saddle": Eval("saddle", {order: Function(f"nested_{order}", flat) for order in NESTED_ORDERS}),
    "particle": Eval("particle", {order: Function(f"nested_{order}", number) for order in NESTED_ORDERS}),
}
