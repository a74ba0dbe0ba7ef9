"""GradBench's input recipe for its cmpad-derived evals (lse, llsq, det, ode), replayed draw for draw.

GradBench's generators (python/gradbench/gradbench/evals/{lse,llsq,det,ode}/run.py at commit f26651a7) seed
NumPy's legacy global generator once, `np.random.seed(31337)`, then draw `np.random.rand(k)` for each size in
turn, in the order of their default size list (llsq and ode sorted by the product of their dimensions). A size's
input therefore depends on every size drawn before it: `replay` draws them all, from a private `RandomState` (the
global one is left alone), and returns the draw for the size asked for. Holds no problem.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

GRADBENCH_SEED = 31337  # every GradBench generator's `np.random.seed(31337)  # For determinism.`


def gradbench_seed(rng: np.random.Generator) -> int:
    """The legacy seed a size's inputs replay from: GradBench's 31337 for adcompare's default seed 0, else the
    seed asked for (`--seed N` replays GradBench's recipe from `np.random.seed(N)`; `--seed 31337` is the default's
    inputs again). Read from the Generator's own SeedSequence, which `Problem.inputs` built from that seed."""
    # NumPy's stubs type seed_seq as ISeedSequence, which declares no entropy; default_rng(seed) builds a SeedSequence
    entropy = rng.bit_generator.seed_seq.entropy  # type: ignore[attr-defined]
    return GRADBENCH_SEED if entropy == 0 else int(entropy)


def replay(rng: np.random.Generator, order: Sequence[tuple[int, ...]], lengths: Sequence[int],
           target: tuple[int, ...]) -> np.ndarray:
    """GradBench's draw for `target`: `rand(lengths[i])` for each size `order[i]` in turn, from one seeded
    RandomState, stopping at `target` (which must be in `order`, GradBench's default sizes)."""
    if target not in order:
        raise ValueError(f"size {target} is not among GradBench's default sizes {list(order)}, whose draws it replays")
    state = np.random.RandomState(gradbench_seed(rng))
    for size, length in zip(order, lengths):
        draw = state.rand(length)
        if size == target:
            return draw
    raise AssertionError("unreachable: target is in order")
