"""ADBench's LSTM objective (Srajer, Kukelova & Fitzgibbon 2018; also GradBench's `lstm`).

A character-level model with l stacked LSTM layers of ADBench's element-wise ("diagonal") kind over a sequence of
c characters, each given as its Unicode code point in b = 14 binary digits (a 0/1 vector, most significant digit
first, as ADBench's data/lstm/gen_data.py writes them; not one-hot); the objective is the mean cross-entropy-like
score of next-character predictions, differentiated w.r.t. all parameters. Follows ADBench's C++
(src/cpp/shared/lstm.h) and Python sources, including their normaliser log(Σ exp(ŷ) + 2) (the "+ 2" is in the
reference implementations, so it is here too). ADBench's tests publish 0.66666518 for data/lstm/lstm_l2_c1024.txt.

Inputs follow ADBench's recipe (data/lstm/gen_data.py, which GradBench's evals/lstm/run.py repeats): the text is
the beginning of Shakespeare's sonnets (`sonnets.txt` here: the first 4,096 characters of ADBench's
data/lstm/lstm_full.txt, decoded from its lstm_l2_c4096.txt; public-domain text), and main parameters, extra
parameters and state are uniform on [0, 1).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from adcompare import Shapes, fold, problem
from adcompare.model.problem import first_lines

from .json_inputs import is_json, read_json_object

LSTM_SIZES = [
    dict(l=1, c=8, b=14),  # small, for quick runs
    dict(l=1, c=80, b=14),  # with c = 800, the full suite's scaling in c (not ADBench's sizes)
    dict(l=1, c=800, b=14),
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
    """ADBench's LSTM objective (src/cpp/shared/lstm.h, lstm_objective): R^((8l+3)·b) → R.

    params (8l + 3, b) stacks ADBench's main_params (2l, 4b) reshaped to (8l, b) and extra_params (3, b)
    (input scale, output scale, output bias); state (2l, b) holds each layer's initial hidden and cell
    state; sequence (c, b) the characters as 0/1 rows (b-digit binary code points). For t = 0 … c−2, the
    input x = sequence[t] ⊙ extra₀ runs through the l layers, ŷ = h_l ⊙ extra₁ + extra₂, and

        f = −(1 / (b(c − 1))) Σₜ Σₖ sequence[t+1]ₖ (ŷₖ − log(Σ exp(ŷ) + 2)).

    The loop over the c − 1 steps is `adcompare.fold`: eager variants run it op by op (~20·l·c operations
    dispatched), JAX's and TensorFlow's compiled variants as one loop (lax.scan, tf.while_loop) whose step they
    compile once; torch.compile unrolls it (compile time grows with c). The loop over l layers is Python,
    unrolled in the step. ADBench's sizes: l ∈ {2, 4}, c ∈ {1024, 4096}, b = 14 (data/lstm/lstm_l*_c*.txt).
    """
    layers = state.shape[0] // 2
    b = sequence.shape[1]
    main = xp.reshape(params[:8 * layers], (2 * layers, 4 * b))
    scale_in, scale_out, bias_out = params[8 * layers], params[8 * layers + 1], params[8 * layers + 2]

    def step(carry, characters):
        hidden, cell, total = list(carry[0]), list(carry[1]), carry[2]
        current, following = characters
        x = current * scale_in
        for i in range(layers):
            hidden[i], cell[i] = _layer(main[2 * i], main[2 * i + 1], hidden[i], cell[i], x, xp)
            x = hidden[i]
        prediction = x * scale_out + bias_out
        normalised = prediction - xp.log(xp.sum(xp.exp(prediction)) + 2.0)
        return hidden, cell, total + xp.sum(following * normalised)

    start = ([state[2 * i] for i in range(layers)], [state[2 * i + 1] for i in range(layers)],
             xp.zeros((), dtype=params.dtype))
    total = fold(step, start, (sequence[:-1], sequence[1:]), xp=xp)[2]
    return -total / (b * (sequence.shape[0] - 1))


SONNETS = Path(__file__).with_name("sonnets.txt")


def encode(text: str, bits: int) -> np.ndarray:
    """(len(text), bits) 0/1 rows: each character's code point in `bits` binary digits, most significant first
    (ADBench's text_to_matrix)."""
    codes = np.array([ord(ch) for ch in text])
    if codes.max(initial=0) >= 2**bits:
        raise ValueError(f"a code point needs more than {bits} binary digits")
    return ((codes[:, None] >> np.arange(bits - 1, -1, -1)) & 1).astype(np.float64)


@lstm.inputs
def _(rng, l, c, b):
    # ADBench (data/lstm/gen_data.py): the sonnets' first c characters as b-digit code points; main_params
    # (2l, 4b), extra_params (3, b) and state (2l, b) uniform on [0, 1) (drawn in that order).
    text = SONNETS.read_text(encoding="utf-8")
    if c > len(text):
        raise ValueError(f"lstm: c = {c} exceeds the {len(text)} characters of {SONNETS.name}")
    main = rng.random((2 * l, 4 * b))
    extra = rng.random((3, b))
    state = rng.random((2 * l, b))
    return {"params": np.concatenate([main.reshape(8 * l, b), extra]), "state": state,
            "sequence": encode(text[:c], b)}


GRADBENCH_KEYS = ("main_params", "extra_params", "state", "sequence")  # GradBench's LSTMInput


def _gradbench_json(path: str) -> dict:
    return read_json_object(path, f"GradBench's lstm input (JSON with {', '.join(GRADBENCH_KEYS)})", GRADBENCH_KEYS)


def _matrices(path: str):
    """(main, extra, state, sequence) from ADBench's text format or GradBench's JSON input."""
    if is_json(path):
        data = _gradbench_json(path)
        return tuple(np.asarray(data[k], dtype=np.float64) for k in GRADBENCH_KEYS)
    text = open(path, encoding="utf-8").read()
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not lines or len(lines[0]) != 3:
        raise ValueError("not ADBench's LSTM format (first line `l c b`)")
    l, c, b = (int(v) for v in lines[0])
    shapes = [(2 * l, 4 * b), (3, b), (2 * l, b), (c, b)]
    if [len(v) for v in lines[1:]] != [cols for rows, cols in shapes for _ in range(rows)]:
        raise ValueError(f"{path}: not ADBench's LSTM format for l={l}, c={c}, b={b} (main params 2l × 4b, extra "
                         f"params 3 × b, state 2l × b, sequence c × b); the body does not match its header")
    out, start = [], 1
    for rows, cols in shapes:
        out.append(np.array([[float(v) for v in line] for line in lines[start:start + rows]]))
        start += rows
    return tuple(out)


@lstm.reads
def read_lstm_file(path):
    """ADBench's data/lstm/lstm_l*_c*.txt, or GradBench's lstm input as JSON."""
    main, extra, state, sequence = _matrices(path)
    l, b = state.shape[0] // 2, state.shape[1]
    if main.shape != (2 * l, 4 * b) or extra.shape != (3, b) or sequence.ndim != 2 or sequence.shape[1] != b:
        raise ValueError(f"inconsistent LSTM shapes: main {main.shape}, extra {extra.shape}, state {state.shape}, "
                         f"sequence {sequence.shape}")
    return ({"l": l, "c": sequence.shape[0], "b": b},
            {"params": np.concatenate([main.reshape(8 * l, b), extra]), "state": state, "sequence": sequence})


@lstm.reads_header
def read_lstm_header(path):
    """`l c b` from the first line of ADBench's text format (the body is not read); GradBench's JSON has no header,
    so its arrays' lengths are taken from the parsed JSON (no arrays built)."""
    if is_json(path):
        data = _gradbench_json(path)
        return {"l": len(data["state"]) // 2, "c": len(data["sequence"]), "b": len(data["state"][0])}
    with open(path, encoding="utf-8") as f:  # `l c b` and main params' 4b numbers tell it from BA's and GMM's
        first, second = first_lines(f)
    if len(first) != 3 or not all(v.isdigit() for v in first) or len(second) != 4 * int(first[2]):
        raise ValueError("not ADBench's LSTM format (first line `l c b`, then 2l lines of 4b main params)")
    return dict(zip(("l", "c", "b"), (int(v) for v in first)))


@lstm.shapes
def _(l, c, b):
    # The Python loop runs c − 1 steps of l layers, ~15 operations each, plus ~6 per step for the prediction.
    return Shapes(wrt=(8 * l + 3, b), output=(), flops=40 * l * c * b, operations=(c - 1) * (15 * l + 6))
