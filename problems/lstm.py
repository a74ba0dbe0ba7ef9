"""ADBench's LSTM objective (Srajer, Kukelova & Fitzgibbon 2018; also GradBench's `lstm`).

A character-level model with l stacked LSTM layers of ADBench's element-wise ("diagonal") kind over a sequence of
c one-hot characters from an alphabet of b = 14; the objective is the mean cross-entropy of next-character
predictions, differentiated w.r.t. all parameters. Follows ADBench's C++ and Python sources, including their
normaliser log(Σ exp(ŷ) + 2) (the "+ 2" is in the reference implementations, so it is here too).
"""
from __future__ import annotations

import numpy as np

from adcompare import Shapes, problem

LSTM_SIZES = [
    dict(l=1, c=8, b=14),  # small, for quick runs
    dict(l=2, c=1024, b=14),  # ADBench lstm_l2_c1024
    dict(l=4, c=1024, b=14),
    dict(l=2, c=4096, b=14),
    dict(l=4, c=4096, b=14),
]


def _sigmoid(x, xp):
    return 1.0 / (1.0 + xp.exp(-x))


def _layer(weight, bias, hidden, cell, x, xp):
    """One ADBench LSTM cell: gates = [x | h | x | h] ⊙ weight + bias (element-wise, not a matrix product)."""
    b = hidden.shape[0]
    gates = xp.concat([x, hidden, x, hidden]) * weight + bias
    forget = _sigmoid(gates[0:b], xp)
    ingate = _sigmoid(gates[b:2 * b], xp)
    outgate = _sigmoid(gates[2 * b:3 * b], xp)
    change = xp.tanh(gates[3 * b:])
    cell = cell * forget + ingate * change
    return outgate * xp.tanh(cell), cell


@problem(sizes=LSTM_SIZES, wrt="params", tags=("classic", "scalar-output", "wide"),
         operators=("value", "grad", "jvp", "vjp"), complex_step_safe=True)
def lstm(params, /, *, state, sequence, xp):
    """ADBench's LSTM objective: R^((8l+3)·b) → R.

    params (8l + 3, b) stacks ADBench's main_params (2l, 4b) reshaped to (8l, b) and extra_params (3, b)
    (input scale, output scale, output bias); state (2l, b) holds each layer's initial hidden and cell
    state; sequence (c, b) the one-hot characters. For t = 0 … c−2, the input x = sequence[t] ⊙ extra₀ runs
    through the l layers, ŷ = h_l ⊙ extra₁ + extra₂, and

        f = −(1 / (b(c − 1))) Σₜ Σₖ sequence[t+1]ₖ (ŷₖ − log(Σ exp(ŷ) + 2)).

    The loop over c − 1 steps and l layers is Python, static in the shapes: eager runs dispatch ~20·l·c
    operations, compilers unroll it (compile time grows with c). ADBench's sizes: l ∈ {2, 4}, c ∈ {1024, 4096},
    b = 14.
    """
    layers = state.shape[0] // 2
    b = sequence.shape[1]
    main = xp.reshape(params[:8 * layers], (2 * layers, 4 * b))
    scale_in, scale_out, bias_out = params[8 * layers], params[8 * layers + 1], params[8 * layers + 2]
    hidden = [state[2 * i] for i in range(layers)]
    cell = [state[2 * i + 1] for i in range(layers)]
    total = 0.0
    for t in range(sequence.shape[0] - 1):
        x = sequence[t] * scale_in
        for i in range(layers):
            hidden[i], cell[i] = _layer(main[2 * i], main[2 * i + 1], hidden[i], cell[i], x, xp)
            x = hidden[i]
        prediction = x * scale_out + bias_out
        normalised = prediction - xp.log(xp.sum(xp.exp(prediction)) + 2.0)
        total = total + xp.sum(sequence[t + 1] * normalised)
    return -total / (b * (sequence.shape[0] - 1))


@lstm.inputs
def _(rng, l, c, b):
    # ADBench's data files hold parameters and states of order 1 and a one-hot text; generated here alike.
    params = rng.uniform(-1.0, 1.0, (8 * l + 3, b))
    state = rng.uniform(-1.0, 1.0, (2 * l, b))
    sequence = np.eye(b)[rng.integers(0, b, c)]
    return {"params": params, "state": state, "sequence": sequence}


@lstm.shapes
def _(l, c, b):
    # The Python loop runs c − 1 steps of l layers, ~15 operations each, plus ~6 per step for the prediction.
    return Shapes(wrt=(8 * l + 3, b), output=(), flops=40 * l * c * b, operations=(c - 1) * (15 * l + 6))
