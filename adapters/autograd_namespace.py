"""An Array API namespace over HIPS autograd's `autograd.numpy`, with every trap of autograd 1.9.1 routed around.

`autograd.numpy` wraps all of NumPy 2, so every standard name exists, but some have no derivative rule (autograd
raises NotImplementedError), some have a reverse rule only (forward mode raises), and one, `concat`, is silently
wrong: it receives a *list* of boxes, autograd only traces boxes passed as direct arguments, so the list's
entries are treated as constants and their derivative is dropped without an error (`concatenate` is special-cased
by autograd and correct). Each fix is one entry in `FIXES`, naming the trap and the route; tests/adapters/
test_autograd.py checks every entry against finite differences in both modes and that the trap still exists.

The linear-algebra fixes for forward mode are new autograd primitives over the raw NumPy functions: the reverse
rule is autograd's own (reused from its registry, so reverse mode is unchanged) and the forward rule is ours.
Nothing in autograd itself is modified.

Known gaps, not used by the problem suite and left as autograd has them: no derivative rule for
`cumulative_prod`, `take_along_axis`, `linalg.trace`, `linalg.diagonal`, `linalg.cross`, `linalg.svdvals`,
`linalg.eigvalsh`, `linalg.qr`, `linalg.matrix_power`; no forward rule for `linalg.svd`, `linalg.pinv`, `hypot`,
and so none for `matrix_norm` with ord 2, -2 or 'nuc' (they go through the SVD).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from adcompare.plugin.adapter import derived_namespace

from .namespace_fix import Fix

# Dtypes and constants come from NumPy itself: autograd.numpy's int32/int64 are wrapped subclasses of NumPy's.
ATTRIBUTE_VALUES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
                    "bool": np.bool_, "pi": np.pi, "e": np.e, "inf": np.inf, "nan": np.nan,
                    "newaxis": None}


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


def _axes(x: Any, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    ndim = np.ndim(x)
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in ((axis,) if isinstance(axis, int) else axis))


# --- names with no derivative rule: rebuilt from differentiable autograd.numpy pieces -------------------------

def _matrix_transpose(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def matrix_transpose(x, /):
        return anp.swapaxes(x, -1, -2)

    return matrix_transpose


def _vecdot(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def vecdot(x1, x2, /, *, axis: int = -1):
        if np.iscomplexobj(x1):
            x1 = anp.conj(x1)
        if np.ndim(x1) == 1 and np.ndim(x2) == 1:
            return anp.dot(x1, x2)  # one primitive instead of multiply + sum: autograd's cost is per primitive
        return anp.sum(x1 * x2, axis=axis)

    return vecdot


def _flip(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def flip(x, /, *, axis: int | Sequence[int] | None = None):
        flipped = set(_axes(x, axis))
        return x[tuple(slice(None, None, -1) if a in flipped else slice(None) for a in range(np.ndim(x)))]

    return flip


def _take(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def take(x, indices, /, *, axis: int | None = None):
        if axis is None:
            if np.ndim(x) != 1:
                raise ValueError(f"take: axis is required for a {np.ndim(x)}-d array (Array API standard)")
            axis = 0
        return x[(slice(None),) * (axis % np.ndim(x)) + (np.asarray(indices),)]

    return take


def _cumulative_sum(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def cumulative_sum(x, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False):
        if axis is None:
            if np.ndim(x) != 1:
                raise ValueError(f"cumulative_sum: axis is required for a {np.ndim(x)}-d array")
            axis = 0
        out = anp.cumsum(x if dtype is None else ns.astype(x, dtype), axis=axis)  # its rule rejects dtype=
        if include_initial:
            shape = list(np.shape(out))
            shape[axis] = 1
            out = anp.concatenate([anp.zeros(shape, dtype=out.dtype), out], axis=axis)
        return out

    return cumulative_sum


def _vector_norm(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def vector_norm(x, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                    ord: float = 2):
        axes = _axes(x, axis)
        a = anp.abs(x)
        if ord == 2:
            return anp.sqrt(anp.sum(a * a, axis=axes, keepdims=keepdims))
        if ord == 1:
            return anp.sum(a, axis=axes, keepdims=keepdims)
        if ord == math.inf:
            return ns.max(a, axis=axes, keepdims=keepdims)
        if ord == -math.inf:
            return ns.min(a, axis=axes, keepdims=keepdims)
        if ord == 0:
            return anp.sum(anp.astype(a != 0, a.dtype), axis=axes, keepdims=keepdims)
        return anp.sum(a ** ord, axis=axes, keepdims=keepdims) ** (1.0 / ord)

    return vector_norm


def _matrix_norm(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def matrix_norm(x, /, *, keepdims: bool = False, ord: float | str = "fro"):
        a = anp.abs(x)
        if ord == "fro":
            out = anp.sqrt(anp.sum(a * a, axis=(-2, -1)))
        elif ord in (1, -1):
            sums = anp.sum(a, axis=-2)  # column sums
            out = ns.max(sums, axis=-1) if ord == 1 else ns.min(sums, axis=-1)
        elif ord in (math.inf, -math.inf):
            sums = anp.sum(a, axis=-1)  # row sums
            out = ns.max(sums, axis=-1) if ord == math.inf else ns.min(sums, axis=-1)
        elif ord in (2, -2, "nuc"):  # reverse mode only: autograd's SVD has no forward rule
            s = anp.linalg.svd(x, compute_uv=False)
            out = anp.sum(s, axis=-1) if ord == "nuc" else ns.max(s, axis=-1) if ord == 2 else ns.min(s, axis=-1)
        else:
            raise ValueError(f"matrix_norm: unsupported ord {ord!r}; use 'fro', 'nuc', 1, -1, 2, -2, inf or -inf")
        return anp.reshape(out, np.shape(out) + (1, 1)) if keepdims else out

    return matrix_norm


def _outer(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def outer(x1, x2, /):
        return anp.outer(x1, x2)  # top-level np.outer carries rules; np.linalg.outer is a distinct function

    return outer


def _alias(name: str) -> Callable[[ModuleType, ModuleType], Callable[..., Any]]:
    """numpy.linalg's copy of a top-level name has no rule; the top-level one has."""
    return lambda anp, ns: getattr(ns, name)


# --- names whose derivative is wrong or fails on an argument form ---------------------------------------------

def _concat(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def concat(arrays, /, *, axis: int | None = 0):
        arrays = list(arrays)
        if axis is None:
            arrays, axis = [anp.reshape(a, (-1,)) for a in arrays], 0
        return anp.concatenate(arrays, axis=axis)  # autograd special-cases concatenate's list argument

    return concat


def _broadcast_to(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    def broadcast_to(x, /, shape: tuple[int, ...]):
        """autograd's reverse rule asserts "Can't handle extra leading dims": add them first with a reshape."""
        lead = len(shape) - np.ndim(x)
        if lead > 0:
            x = anp.reshape(x, (1,) * lead + tuple(np.shape(x)))
        return anp.broadcast_to(x, tuple(shape))

    return broadcast_to


# --- names with a reverse rule but no forward rule: new primitives, autograd's VJP plus our JVP ---------------

def _primitive_with_jvp(anp: ModuleType, raw: Callable[..., Any], original: Any,
                        *jvps: Callable[..., Any]) -> Callable[..., Any]:
    """A new autograd primitive over NumPy's `raw`, reusing the reverse rule autograd registered for `original`
    (autograd.core.primitive_vjps: the one table autograd keeps them in) and adding forward rules `jvps`."""
    from autograd.core import primitive_vjps
    from autograd.extend import defjvp, defvjp_argnums, primitive

    fn = primitive(raw)
    defvjp_argnums(fn, primitive_vjps[original])
    defjvp(fn, *jvps)
    return fn


def _mT(x):
    import autograd.numpy as anp

    return anp.swapaxes(x, -1, -2)


def _det(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    # d det(A) = det(A) · tr(A⁻¹ dA)
    return _primitive_with_jvp(anp, np.linalg.det, anp.linalg.det, lambda g, ans, a: ans * anp.trace(
        ns.linalg.solve(a, g), axis1=-2, axis2=-1))


def _slogdet(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    # d log|det A| = tr(A⁻¹ dA); the sign is locally constant. autograd's tuple output takes a tuple tangent.
    def jvp(g, ans, a):
        return (anp.zeros_like(ans[0]), anp.trace(ns.linalg.solve(a, g), axis1=-2, axis2=-1))

    raw = _primitive_with_jvp(anp, lambda a: tuple(np.linalg.slogdet(a)), anp.linalg.slogdet, jvp)

    def slogdet(x, /):
        sign, logabsdet = raw(x)  # a plain tuple through autograd (it has no vspace for NumPy's namedtuple)
        return SlogdetResult(sign, logabsdet)

    return slogdet


def _inv(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    # d A⁻¹ = −A⁻¹ dA A⁻¹
    return _primitive_with_jvp(anp, np.linalg.inv, anp.linalg.inv, lambda g, ans, a: -(ans @ g @ ans))


def _solve(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    # x = A⁻¹ b: dx = A⁻¹ (db − dA x). NumPy 2 treats b as a vector only when b is 1-d.
    def jvp_a(g, ans, a, b):
        if np.ndim(b) == 1:
            return -solve(a, (g @ ans[..., None]))[..., 0]
        return -solve(a, g @ ans)

    solve = _primitive_with_jvp(anp, np.linalg.solve, anp.linalg.solve, jvp_a,
                                lambda g, ans, a, b: solve(a, g))
    return solve


def _cholesky(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    # dL = L Φ(L⁻¹ sym(dA) L⁻ᵀ), Φ = lower triangle with the diagonal halved. sym(dA): autograd's reverse rule
    # returns the symmetrised gradient, so the forward rule differentiates the same function.
    def jvp(g, ans, a):
        sym = (g + _mT(g)) / 2
        inner = _mT(ns.linalg.solve(ans, _mT(ns.linalg.solve(ans, sym))))
        eye = anp.eye(np.shape(a)[-1], dtype=ans.dtype)
        return ans @ (anp.tril(inner) - inner * eye / 2)

    lower = _primitive_with_jvp(anp, np.linalg.cholesky, anp.linalg.cholesky, jvp)

    def cholesky(x, /, *, upper: bool = False):
        factor = lower(x)
        return _mT(factor) if upper else factor

    return cholesky


def _eigh(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    # A = V diag(w) Vᵀ: dw = diag(Vᵀ dA V), dV = V (F ∘ Vᵀ dA V) with F_ij = 1/(w_j − w_i), 0 on the diagonal.
    # eigh reads the lower triangle only (as autograd's reverse rule assumes), so dA is taken from it too.
    def jvp(g, ans, a, UPLO="L"):
        w, v = ans
        tri = anp.tril(g, -1) if UPLO == "L" else anp.triu(g, 1)
        eye = anp.eye(np.shape(a)[-1], dtype=w.dtype)
        da = tri + _mT(tri) + g * eye
        m = _mT(v) @ da @ v
        gap = w[..., None, :] - w[..., :, None]
        f = (1 - eye) / (gap + eye)
        return (anp.sum(m * eye, axis=-1), v @ (f * m))

    raw = _primitive_with_jvp(anp, lambda a, UPLO="L": tuple(np.linalg.eigh(a, UPLO)), anp.linalg.eigh, jvp)

    def eigh(x, /):
        eigenvalues, eigenvectors = raw(x)
        return EighResult(eigenvalues, eigenvectors)

    return eigh


def _astype(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
    from autograd.extend import defjvp, defvjp, primitive

    @primitive
    def astype(x, dtype, /, *, copy: bool = True):
        return np.astype(x, dtype, copy=copy)

    defvjp(astype, lambda ans, x, dtype, **kw: lambda g: astype(g, x.dtype))
    defjvp(astype, lambda g, ans, x, dtype, **kw: astype(g, dtype))
    return astype


# --- names whose rules turn float32 into float64: the same rules, cotangent/tangent cast back ----------------
# maximum/minimum (a bool mask divided by the float64 1.0 + mask), max/min (a mask divided by an integer count)
# and where (anp.zeros of the default dtype) make float32 derivatives float64. The mask is 0, ½ or 1, so casting
# the product back gives exactly the float32 result; the cast is our astype, so higher orders still trace it.

def _keep_dtype(original: Callable[[ModuleType], Any]) -> Callable[[ModuleType, ModuleType], Callable[..., Any]]:
    def build(anp: ModuleType, ns: ModuleType) -> Callable[..., Any]:
        from autograd.core import primitive_jvps, primitive_vjps
        from autograd.extend import defjvp_argnums, defvjp_argnums, primitive

        wrapped = original(anp)
        vjp_maker, jvp_maker = primitive_vjps[wrapped], primitive_jvps[wrapped]
        raw = wrapped.fun

        def call(*args, **kwargs):  # a plain function: a ufunc would be dispatched back to autograd's primitive
            return raw(*args, **kwargs)

        fn = primitive(functools.wraps(raw)(call))

        def cast(value: Any, like: Any) -> Any:
            dtype = getattr(like, "dtype", None)
            if dtype is None or getattr(value, "dtype", dtype) == dtype:
                return value
            return ns.astype(value, dtype)

        def vjpmaker(argnums, ans, args, kwargs):
            vjp = vjp_maker(argnums, ans, args, kwargs)
            return lambda g: tuple(cast(c, args[i]) for c, i in zip(vjp(g), argnums))

        defvjp_argnums(fn, vjpmaker)
        defjvp_argnums(fn, lambda argnums, gs, ans, args, kwargs: cast(jvp_maker(argnums, gs, ans, args, kwargs),
                                                                      ans))
        return fn

    return build


FIXES: dict[str, Fix] = {
    "matrix_transpose": Fix("no derivative rule", "anp.swapaxes(x, -1, -2)", _matrix_transpose),
    "vecdot": Fix("no derivative rule", "anp.dot for vectors, else anp.sum(x1 * x2, axis)", _vecdot),
    "flip": Fix("no derivative rule", "indexing with reversed slices", _flip),
    "take": Fix("no derivative rule", "indexing with an integer array", _take),
    "cumulative_sum": Fix("no derivative rule", "anp.cumsum", _cumulative_sum),
    "concat": Fix("wrong derivative (list entries traced as constants, no error)", "anp.concatenate", _concat),
    "broadcast_to": Fix("reverse rule fails on added leading dims", "reshape to full rank first", _broadcast_to),
    "astype": Fix("no forward-mode rule", "own primitive: cast the tangent/cotangent", _astype),
    "maximum": Fix("float32 derivative becomes float64", "autograd's rules, cast back", _keep_dtype(
        lambda anp: anp.maximum)),
    "minimum": Fix("float32 derivative becomes float64", "autograd's rules, cast back", _keep_dtype(
        lambda anp: anp.minimum)),
    "max": Fix("float32 derivative becomes float64", "autograd's rules, cast back", _keep_dtype(lambda anp: anp.max)),
    "min": Fix("float32 derivative becomes float64", "autograd's rules, cast back", _keep_dtype(lambda anp: anp.min)),
    "where": Fix("float32 derivative becomes float64", "autograd's rules, cast back", _keep_dtype(
        lambda anp: getattr(anp, "_original_where", anp.where))),  # ≥ 1.9: anp.where wraps this primitive
    "linalg.matrix_transpose": Fix("no derivative rule", "anp.swapaxes(x, -1, -2)", _matrix_transpose),
    "linalg.vecdot": Fix("no derivative rule", "as vecdot", _vecdot),
    "linalg.outer": Fix("no derivative rule", "anp.outer", _outer),
    "linalg.vector_norm": Fix("no derivative rule", "sqrt/sum/max/min of |x|", _vector_norm),
    "linalg.matrix_norm": Fix("no derivative rule", "sums of |x|, or the SVD for 2, -2, 'nuc'", _matrix_norm),
    "linalg.matmul": Fix("no derivative rule", "top-level matmul", _alias("matmul")),
    "linalg.tensordot": Fix("no derivative rule", "top-level tensordot", _alias("tensordot")),
    "linalg.det": Fix("no forward-mode rule", "own primitive: autograd's VJP + det·tr(A⁻¹dA)", _det),
    "linalg.slogdet": Fix("no forward-mode rule", "own primitive: autograd's VJP + tr(A⁻¹dA); named result "
                          "(traced, autograd's is a bare SequenceBox)", _slogdet),
    "linalg.inv": Fix("no forward-mode rule", "own primitive: autograd's VJP + −A⁻¹dA A⁻¹", _inv),
    "linalg.solve": Fix("no forward-mode rule", "own primitive: autograd's VJP + A⁻¹(db − dA x)", _solve),
    "linalg.cholesky": Fix("no forward-mode rule", "own primitive: autograd's VJP + LΦ(L⁻¹dA L⁻ᵀ)", _cholesky),
    "linalg.eigh": Fix("no forward-mode rule", "own primitive: autograd's VJP + first-order perturbation; "
                       "named result (traced, autograd's is a bare SequenceBox)", _eigh),
}


@functools.cache
def namespace() -> ModuleType:
    """autograd.numpy with `FIXES` applied and NumPy's dtypes, as a module of its own (autograd's is untouched)."""
    import autograd.numpy as anp

    linalg = derived_namespace("adcompare.adapters.autograd.xp.linalg",
                               "autograd.numpy.linalg with adcompare's FIXES", anp.linalg)
    ns = derived_namespace("adcompare.adapters.autograd.xp", "autograd.numpy with adcompare's FIXES (Array API names)",
                           anp, {**ATTRIBUTE_VALUES, "linalg": linalg})
    for name in sorted(FIXES, key=lambda n: "." in n):  # top level first: some linalg fixes alias it
        owner, _, attr = name.rpartition(".")
        target = linalg if owner == "linalg" else ns
        setattr(target, attr, FIXES[name].build(anp, ns))
    return ns
