"""An Array API namespace over plain TensorFlow ops, written here because TensorFlow has none.

`tf.experimental.numpy` lacks about thirty standard names (`concat`, `permute_dims`, `matrix_transpose`,
`vecdot`, `pow`, `astype`, the `acos`/`asin`/`atan` spellings, all of `linalg`) and its creation functions
default to float64, so a float32 problem would silently turn float64. This module maps each standard name the
problem suite uses onto the TensorFlow op an expert would call:

- `ALIASES`: names that are one TensorFlow function under another name (a dotted path below `tf`);
- `DEFINED`: names that need a few lines (argument conventions, 1-d `matmul`, named `slogdet`, …);
- `ATTRIBUTES`: dtypes and constants.

Every op here has a TensorFlow gradient, and ForwardAccumulator derives forward mode from it, so every name is
differentiable in both modes (tests/adapters/test_tensorflow.py checks full Jacobians against finite
differences). Where TensorFlow has several spellings the fast one is used: eager `tf.einsum` took 41-54 µs
against 486-581 µs for `tf.tensordot` and 128 µs for `reduce_sum(a * b)` on two 10,000-vectors here.

Creation functions honour `dtype=` (default float32, TensorFlow's default float) and `device=`: a non-empty
device string places the op there (`tf.device`); symbolic tensors inside `tf.function` report device '', which
leaves placement to TensorFlow, as for any op. The adapter pins the worker's device, so both agree.

Not covered: TensorFlow's `Tensor.__matmul__` is `tf.linalg.matmul`, rank >= 2 only, so `a @ b` with a 1-d
operand fails (no namespace can change an operator); `xp.matmul` here handles 1-d operands as the standard says.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import math
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NamedTuple

from adcompare.model import control_flow
from adcompare.plugin.adapter import derived_namespace

# What `import tensorflow` loads that no cell uses, each behind an `except ImportError` of TensorFlow's: Keras (loaded
# eagerly for its optimizers' SavedModel registrations; with it, matplotlib for Keras' image gallery) and, for
# tf.lite's JAX converter, JAX where installed. 1.5 s of a TensorFlow worker's ~4.5 s start-up here (the report starts
# two side by side). They are found but not run: TensorFlow still reads Keras' folder from its spec for
# `tensorflow.keras`, and `tf.keras` loads Keras on first use. tf.lite's JAX converter stays off in that process.
NOT_LOADED_WITH_TENSORFLOW = ("keras", "jax")


class _NotRun(importlib.abc.Loader):
    """The loader of a module found but refused while TensorFlow imports: its import raises ImportError."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        raise ImportError(f"{module.__name__} is not loaded with tensorflow (adcompare's import_tensorflow)")


class _FoundNotRun(importlib.abc.MetaPathFinder):
    """Finds `names` where they are installed (so that importlib.util.find_spec still gives their folder) with a
    loader that refuses them."""

    def __init__(self, names: Sequence[str]):
        self.names = frozenset(names)

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _NotRun()
        return spec


def import_tensorflow() -> ModuleType:
    """TensorFlow, imported quietly (both variables are needed here: either alone still prints start-up logs) and
    without the modules of NOT_LOADED_WITH_TENSORFLOW that are not imported yet: they import as usual afterwards."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    refuse = _FoundNotRun([name for name in NOT_LOADED_WITH_TENSORFLOW if name not in sys.modules])
    sys.meta_path.insert(0, refuse)
    try:
        import tensorflow as tf
    finally:
        sys.meta_path.remove(refuse)
    return tf


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


# Standard name -> dotted path below `tf`.
ALIASES: dict[str, str] = {
    "abs": "math.abs", "acos": "math.acos", "acosh": "math.acosh", "add": "math.add", "asin": "math.asin",
    "asinh": "math.asinh", "atan": "math.atan", "atan2": "math.atan2", "atanh": "math.atanh", "cos": "math.cos",
    "cosh": "math.cosh", "divide": "math.divide", "exp": "math.exp", "expm1": "math.expm1", "log": "math.log",
    "log1p": "math.log1p", "maximum": "math.maximum", "minimum": "math.minimum", "multiply": "math.multiply",
    "negative": "math.negative", "pow": "math.pow", "reciprocal": "math.reciprocal", "sign": "math.sign",
    "sin": "math.sin", "sinh": "math.sinh", "sqrt": "math.sqrt", "square": "math.square",
    "subtract": "math.subtract", "tan": "math.tan", "tanh": "math.tanh", "where": "where",
    "matrix_transpose": "linalg.matrix_transpose", "broadcast_to": "broadcast_to", "reshape": "reshape",
    "astype": "cast", "equal": "math.equal", "less": "math.less", "greater": "math.greater",
    "linalg.det": "linalg.det", "linalg.inv": "linalg.inv", "linalg.matrix_transpose": "linalg.matrix_transpose",
}

ATTRIBUTES: dict[str, Callable[[ModuleType], Any]] = {
    "float32": lambda tf: tf.float32, "float64": lambda tf: tf.float64, "int32": lambda tf: tf.int32,
    "int64": lambda tf: tf.int64, "bool": lambda tf: tf.bool, "pi": lambda tf: math.pi, "e": lambda tf: math.e,
    "inf": lambda tf: math.inf, "nan": lambda tf: math.nan, "newaxis": lambda tf: None,
}


def _axis_list(axis: int | Sequence[int] | None) -> list[int] | None:
    return None if axis is None else [axis] if isinstance(axis, int) else list(axis)


# --- names that need a few lines: factory(tf) -> function -------------------------------------------------

def _placed(tf: ModuleType, device: Any):
    """Where a creation op runs: `device` when it names one (x.device of an eager tensor), else the default."""
    return tf.device(device) if isinstance(device, str) and device else contextlib.nullcontext()


def _creation(tf: ModuleType) -> dict[str, Callable[..., Any]]:
    def dt(dtype: Any) -> Any:
        return tf.float32 if dtype is None else tf.as_dtype(dtype)

    def asarray(obj, /, *, dtype=None, device=None, copy=None):
        with _placed(tf, device):
            if tf.is_tensor(obj):
                return obj if dtype is None or obj.dtype == tf.as_dtype(dtype) else tf.cast(obj, dtype)
            return tf.convert_to_tensor(obj, dtype=None if dtype is None else tf.as_dtype(dtype))

    def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
        with _placed(tf, device):
            start, stop = (0, start) if stop is None else (start, stop)
            return tf.range(start, stop, step, dtype=dtype if dtype is not None else None)

    def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
        if k != 0:
            raise NotImplementedError(f"eye: k={k} is not implemented for TensorFlow here; only k=0")
        with _placed(tf, device):
            return tf.eye(n_rows, n_cols, dtype=dt(dtype))

    def full(shape, fill_value, *, dtype=None, device=None):
        with _placed(tf, device):
            return tf.fill(shape, tf.constant(fill_value, dtype=dt(dtype)))

    def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
        with _placed(tf, device):
            d = dt(dtype)
            if endpoint:
                return tf.linspace(tf.constant(start, d), tf.constant(stop, d), num)
            return tf.linspace(tf.constant(start, d), tf.constant(stop, d), num + 1)[:-1]

    def ones(shape, *, dtype=None, device=None):
        with _placed(tf, device):
            return tf.ones(shape, dtype=dt(dtype))

    def zeros(shape, *, dtype=None, device=None):
        with _placed(tf, device):
            return tf.zeros(shape, dtype=dt(dtype))

    def ones_like(x, /, *, dtype=None, device=None):
        with _placed(tf, device):
            return tf.ones_like(x, dtype=dtype)

    def zeros_like(x, /, *, dtype=None, device=None):
        with _placed(tf, device):
            return tf.zeros_like(x, dtype=dtype)

    return dict(asarray=asarray, arange=arange, eye=eye, full=full, linspace=linspace, ones=ones, zeros=zeros,
                ones_like=ones_like, zeros_like=zeros_like)


def _elementwise(tf: ModuleType) -> dict[str, Callable[..., Any]]:
    def clip(x, /, min=None, max=None):
        if min is not None:
            x = tf.math.maximum(x, min)
        if max is not None:
            x = tf.math.minimum(x, max)
        return x

    def logaddexp(x1, x2, /):
        # log(eˣ¹ + eˣ²) shifted by a constant m: exact for any m, so m is a stop_gradient and the derivative is
        # the softmax weights even at x1 == x2 (max + log1p(exp(-|d|)) gives (1, 0) there, not (½, ½)).
        m = tf.stop_gradient(tf.math.maximum(x1, x2))
        return m + tf.math.log(tf.math.exp(x1 - m) + tf.math.exp(x2 - m))

    return dict(clip=clip, logaddexp=logaddexp)


def _reductions(tf: ModuleType) -> dict[str, Callable[..., Any]]:
    def reduction(op: Callable[..., Any], name: str) -> Callable[..., Any]:
        def reduce(x, /, *, axis=None, keepdims=False, **kwargs):
            dtype = kwargs.pop("dtype", None)
            if kwargs:
                raise TypeError(f"{name}: unexpected arguments {sorted(kwargs)}")
            if dtype is not None:
                x = tf.cast(x, dtype)
            return op(x, axis=_axis_list(axis), keepdims=keepdims)

        reduce.__name__ = reduce.__qualname__ = name
        return reduce

    def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
        if axis is None:
            if x.shape.rank != 1:
                raise ValueError(f"cumulative_sum: axis is required for a {x.shape.rank}-d array")
            axis = 0
        if dtype is not None:
            x = tf.cast(x, dtype)
        out = tf.math.cumsum(x, axis=axis)
        if include_initial:
            first = tf.zeros_like(tf.gather(out, [0], axis=axis))
            out = tf.concat([first, out], axis=axis)
        return out

    return dict(sum=reduction(tf.math.reduce_sum, "sum"), prod=reduction(tf.math.reduce_prod, "prod"),
                mean=reduction(tf.math.reduce_mean, "mean"), max=reduction(tf.math.reduce_max, "max"),
                min=reduction(tf.math.reduce_min, "min"), cumulative_sum=cumulative_sum)


def _linear_algebra(tf: ModuleType) -> dict[str, Callable[..., Any]]:
    def matmul(x1, x2, /):
        """tf.linalg.matmul needs rank >= 2; the standard's 1-d cases go through einsum."""
        r1, r2 = x1.shape.rank, x2.shape.rank
        if r1 >= 2 and r2 >= 2:
            return tf.linalg.matmul(x1, x2)
        if r1 == 1 and r2 == 1:
            return tf.einsum("i,i->", x1, x2)
        if r1 == 1:
            return tf.einsum("i,...ij->...j", x1, x2)
        return tf.einsum("...ij,j->...i", x1, x2)

    def vecdot(x1, x2, /, *, axis=-1):
        if axis != -1:
            x1, x2 = tf.experimental.numpy.moveaxis(x1, axis, -1), tf.experimental.numpy.moveaxis(x2, axis, -1)
        if x1.shape.rank == 1 and x2.shape.rank == 1:
            return tf.einsum("i,i->", x1, x2)
        return tf.einsum("...i,...i->...", x1, x2)

    def tensordot(x1, x2, /, *, axes=2):
        """As einsum: ten times faster than tf.tensordot eagerly (transposes and reshapes around a matmul)."""
        letters = iter("abcdefghijklmnopqrstuvwxyz")
        a = [next(letters) for _ in range(x1.shape.rank)]
        b = [next(letters) for _ in range(x2.shape.rank)]
        if isinstance(axes, int):
            pairs = list(zip(range(x1.shape.rank - axes, x1.shape.rank), range(axes)))
        else:
            pairs = list(zip(*axes))
        for i, j in pairs:
            b[j] = a[i]
        contracted = {a[i] for i, _ in pairs}
        out = [c for c in a if c not in contracted] + [c for c in b if c not in contracted]
        return tf.einsum(f"{''.join(a)},{''.join(b)}->{''.join(out)}", x1, x2)

    def outer(x1, x2, /):
        return tf.einsum("i,j->ij", x1, x2)

    def cholesky(x, /, *, upper=False):
        lower = tf.linalg.cholesky(x)
        return tf.linalg.matrix_transpose(lower) if upper else lower

    def slogdet(x, /):
        sign, logabsdet = tf.linalg.slogdet(x)
        return SlogdetResult(sign, logabsdet)

    def solve(x1, x2, /):
        if x2.shape.rank == 1:  # the standard's vector right-hand side; tf.linalg.solve wants a matrix
            return tf.linalg.solve(x1, x2[:, None])[..., 0]
        return tf.linalg.solve(x1, x2)

    def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
        axes = _axis_list(axis)
        if ord == 2:
            return tf.math.sqrt(tf.math.reduce_sum(x * x, axis=axes, keepdims=keepdims))
        a = tf.math.abs(x)
        if ord == 1:
            return tf.math.reduce_sum(a, axis=axes, keepdims=keepdims)
        if ord == math.inf:
            return tf.math.reduce_max(a, axis=axes, keepdims=keepdims)
        if ord == -math.inf:
            return tf.math.reduce_min(a, axis=axes, keepdims=keepdims)
        return tf.math.reduce_sum(a ** ord, axis=axes, keepdims=keepdims) ** (1.0 / ord)

    def matrix_norm(x, /, *, keepdims=False, ord="fro"):
        if ord == "fro":
            out = tf.math.sqrt(tf.math.reduce_sum(x * x, axis=[-2, -1]))
        elif ord in (1, -1, math.inf, -math.inf):
            sums = tf.math.reduce_sum(tf.math.abs(x), axis=-2 if ord in (1, -1) else -1)  # column or row sums
            out = (tf.math.reduce_max if ord in (1, math.inf) else tf.math.reduce_min)(sums, axis=-1)
        elif ord in (2, -2, "nuc"):
            s = tf.linalg.svd(x, compute_uv=False)
            out = {2: tf.math.reduce_max, -2: tf.math.reduce_min, "nuc": tf.math.reduce_sum}[ord](s, axis=-1)
        else:
            raise ValueError(f"matrix_norm: unsupported ord {ord!r}; use 'fro', 'nuc', 1, -1, 2, -2, inf or -inf")
        return out[..., None, None] if keepdims else out

    return dict(matmul=matmul, vecdot=vecdot, tensordot=tensordot, outer=outer, cholesky=cholesky,
                slogdet=slogdet, solve=solve, vector_norm=vector_norm, matrix_norm=matrix_norm)


def _manipulation(tf: ModuleType) -> dict[str, Callable[..., Any]]:
    def concat(arrays, /, *, axis=0):
        arrays = list(arrays)
        if axis is None:
            arrays, axis = [tf.reshape(a, [-1]) for a in arrays], 0
        return tf.concat(arrays, axis=axis)

    def stack(arrays, /, *, axis=0):
        return tf.stack(list(arrays), axis=axis)

    def expand_dims(x, /, *, axis=0):
        return tf.expand_dims(x, axis)

    def squeeze(x, /, axis):
        return tf.squeeze(x, axis=axis)

    def flip(x, /, *, axis=None):
        return tf.reverse(x, list(range(x.shape.rank)) if axis is None else _axis_list(axis))

    def permute_dims(x, /, axes):
        return tf.transpose(x, perm=list(axes))

    def take(x, indices, /, *, axis=None):
        if axis is None:
            if x.shape.rank != 1:
                raise ValueError(f"take: axis is required for a {x.shape.rank}-d array (Array API standard)")
            axis = 0
        return tf.gather(x, indices, axis=axis)

    def tile(x, repetitions, /):
        reps = [1] * (x.shape.rank - len(repetitions)) + list(repetitions)
        if len(reps) > x.shape.rank:
            x = tf.reshape(x, [1] * (len(reps) - x.shape.rank) + x.shape.as_list())
        return tf.tile(x, reps)

    return dict(concat=concat, stack=stack, expand_dims=expand_dims, squeeze=squeeze, flip=flip,
                permute_dims=permute_dims, take=take, tile=tile)


DEFINED: tuple[Callable[[ModuleType], dict[str, Callable[..., Any]]], ...] = (
    _creation, _elementwise, _reductions, _linear_algebra, _manipulation)
LINALG = ("cholesky", "det", "inv", "matmul", "matrix_norm", "matrix_transpose", "outer", "slogdet", "solve",
          "tensordot", "vecdot", "vector_norm")
LINALG_ONLY = frozenset({"outer", "cholesky", "slogdet", "solve", "vector_norm", "matrix_norm"})


def _resolve(tf: ModuleType, path: str) -> Any:
    return functools.reduce(getattr, path.split("."), tf)


@functools.cache
def namespace() -> ModuleType:
    """The namespace module (built once, on first use; imports TensorFlow)."""
    tf = import_tensorflow()
    linalg = derived_namespace("adcompare.adapters.tensorflow.xp.linalg", "Array API linalg names over tf.linalg")
    ns = derived_namespace("adcompare.adapters.tensorflow.xp", "Array API names over TensorFlow ops (adcompare)",
                           names={"linalg": linalg}, fold=_while_fold(tf))
    control_flow.register(ns, while_loop=_staged_while(tf), cond=_staged_cond(tf))
    defined: dict[str, Callable[..., Any]] = {}
    for factory in DEFINED:
        defined.update(factory(tf))
    for name, path in ALIASES.items():
        owner, _, attr = name.rpartition(".")
        setattr(linalg if owner == "linalg" else ns, attr, _resolve(tf, path))
    for name, fn in defined.items():
        if name not in LINALG_ONLY:
            setattr(ns, name, fn)
        if name in LINALG:
            setattr(linalg, name, fn)
    for name, value in ATTRIBUTES.items():
        setattr(ns, name, value(tf))
    return ns


def _while_fold(tf: ModuleType) -> Callable[..., Any]:
    """`adcompare.fold` inside tf.function (graph and XLA variants): a tf.while_loop, so the step is traced once;
    eagerly (NotImplemented) the Python loop runs op by op, as the eager variant should."""
    def fold(step: Callable[..., Any], carry: Any, xs: tuple[Any, ...]) -> Any:
        if tf.executing_eagerly():
            return NotImplemented
        n = int(xs[0].shape[0])

        def body(t: Any, c: Any) -> tuple[Any, Any]:
            return t + 1, step(c, tuple(tf.gather(x, t) for x in xs))

        return tf.while_loop(lambda t, c: t < n, body, (tf.constant(0), carry), maximum_iterations=n)[1]
    return fold


def _staged_while(tf: ModuleType) -> control_flow.NativeWhile:
    """`adcompare.while_loop` inside tf.function (graph and XLA variants): a tf.while_loop with
    maximum_iterations=max_trips (XLA needs the bound: "XLA compilation requires a fixed tensor list size"), the
    trips counted to flag a loop that reached it; eagerly (NotImplemented) the Python loop runs op by op."""
    def run(cond: control_flow.Cond, body: control_flow.Body, state: control_flow.State, max_trips: int) -> Any:
        if tf.executing_eagerly():
            return NotImplemented
        trips, final = tf.while_loop(lambda t, s: cond(s), lambda t, s: (t + 1, tuple(body(s))),
                                     (tf.constant(0), state), maximum_iterations=max_trips)
        return final, tf.logical_and(trips >= max_trips, cond(final))

    return run


def _staged_cond(tf: ModuleType) -> control_flow.NativeCond:
    """`adcompare.cond` inside tf.function: both branches, the result chosen by tf.where. Not tf.cond: a
    ForwardAccumulator through a tf.cond inside a tf.while_loop fails (`assert t.graph == cond_graph` in
    cond_v2._resolve_grad_inputs, TensorFlow 2.21). Eagerly (NotImplemented) Python's `if` runs one branch."""
    def run(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], operands: tuple[Any, ...]) -> Any:
        if tf.executing_eagerly():
            return NotImplemented
        return tf.nest.map_structure(lambda a, b: tf.where(pred, a, b), true_fn(*operands), false_fn(*operands))

    return run
