"""Problems: a function written once against the Array API namespace `xp`, plus a seeded input generator.

A problem function takes its differentiated argument (`wrt`), optionally a batch argument for the per-example
operators, and constants, all by name, plus the namespace as keyword-only `xp`. Rules for authors (each one was
learned the hard way on a real framework, see docs/problems.md): pass `dtype=x.dtype` to every array-creation
call, and derive arrays that must live on x's device with `zeros_like`/`ones_like` (JAX tracers have no
`.device`); no negative-step slices; no list indexing; no `.mT`.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from adcompare.model.errors import ProblemDefinitionError, closest, unknown
from adcompare.model.operators import OPERATORS, applicable
from adcompare.model.shapes import Shapes

DTYPES = ("float32", "float64")


@dataclass(frozen=True, order=True)
class Size:
    """A named set of dimensions, e.g. n=10000 or n=10, p=256, o=5 (order as declared).

    A size whose inputs are not the seed-0 generated ones says so in its label, so its cells never share a key
    (resume, merge, reference cache) with generated ones: `seed` appends `-seed7`; an input file (`source`, read
    by the problem's `@<name>.reads` reader) appends the file's stem and the first 12 hex digits of its sha256.
    """

    dims: tuple[tuple[str, int], ...]
    seed: int = 0
    source: str = ""  # path of the input file the inputs are read from ("" when generated)
    sha256: str = ""  # of that file, checked again whenever it is read

    @property
    def dims_label(self) -> str:
        return "-".join(f"{k}{v}" for k, v in self.dims)

    @property
    def label(self) -> str:
        if self.source:
            return f"{self.dims_label}-{Path(self.source).stem}-{self.sha256[:12]}"
        return self.dims_label + (f"-seed{self.seed}" if self.seed else "")

    def provenance(self) -> dict[str, Any]:
        """Where the inputs came from, recorded with every measurement of this size."""
        if self.source:
            return {"inputs_file": self.source, "inputs_sha256": self.sha256}
        return {"inputs_seed": self.seed}

    def as_dict(self) -> dict[str, int]:
        return dict(self.dims)

    def __str__(self) -> str:
        return self.label


def grid(**axes: Iterable[int]) -> list[dict[str, int]]:
    """Every combination of the given dimension values: grid(n=[5, 10], p=[8, 16]) gives four sizes."""
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(list(v) for v in axes.values()))]


@dataclass(frozen=True)
class Problem:
    """A validated problem; built by `@problem` plus `.inputs`, never by hand."""

    name: str
    function: Callable[..., Any]
    wrt: str
    batch: str | None
    sizes: tuple[Size, ...]
    generator: Callable[..., Mapping[str, np.ndarray]]
    tags: tuple[str, ...] = ()
    reader: Callable[[str], tuple[dict[str, int], Mapping[str, np.ndarray]]] | None = None  # input files
    header_reader: Callable[[str], dict[str, int]] | None = None  # a file's dims without its body, for planning
    description: str = ""
    operators: tuple[str, ...] | None = None  # None: every operator the output shape admits
    complex_step_safe: bool = False
    compilable: bool = True  # False: data-dependent Python control flow; a compiler must fail it
    source: str = ""
    shape_function: Callable[..., Shapes] | None = None  # (**dims) -> Shapes, declared with @<name>.shapes
    # (operator, f(wrt, **constants) -> float64 result in NumPy): the problem's own closed form of a derivative,
    # declared with @<name>.analytic(operator); the float64 reference uses it instead of differencing (a tuple of
    # pairs: a Problem is hashable)
    analytic: tuple[tuple[str, Callable[..., np.ndarray]], ...] = ()
    more_sizes: str = ""  # how sizes beyond the declared ones run (e.g. through --inputs): said to whoever asks one

    @property
    def sizes_ascending(self) -> tuple[Size, ...]:
        """The sizes from smallest to largest: by total dimension units, ties dimension by dimension. The one order
        behind "smallest" (tests, checks and the quick suite start there) and "larger" (a timeout skips them)."""
        return tuple(sorted(self.sizes, key=lambda s: (sum(v for _, v in s.dims), tuple(v for _, v in s.dims))))

    @property
    def smallest_size(self) -> Size:
        return self.sizes_ascending[0]

    def size(self, label: str) -> Size:
        for s in self.sizes:
            if s.label == label:
                return s
        raise unknown(f"size of problem {self.name!r}", label, [s.label for s in self.sizes], self.more_sizes)

    def inputs(self, size: Size, dtype: str, seed: int | None = None) -> dict[str, np.ndarray]:
        """The inputs at `size`, seeded (`seed`, default the size's) or read from its file; floating arrays cast to
        `dtype`, others untouched."""
        if size.source:  # the file's arrays are cached per process: each caller casts its own copy
            return {k: _cast(v, dtype) for k, v in read_input_file(self, size.source, size.sha256)[1].items()}
        raw = self.generator(np.random.default_rng(size.seed if seed is None else seed), **size.as_dict())
        return {k: _cast(v, dtype, copy=False) for k, v in raw.items()}  # fresh: no copy (BA's largest: 3.9 GB)

    def bind(self, xp: ModuleType, constants: Mapping[str, Any]) -> Callable[..., Any]:
        """f(wrt) with constants bound, or f(wrt, example) when the batch argument is left free.

        The free arguments are positional because JAX's and torch.func's vmap treat keywords differently.
        """
        fn, wrt = self.function, self.wrt
        positional = _positional_only(fn)
        batch = self.batch if self.batch is not None and self.batch not in constants else None  # left free
        free = (wrt,) if batch is None else (wrt, batch)
        # Constants are split into positional and keyword arguments once, here, not on every call: the call sits
        # inside every timed region.
        kwargs = {k: v for k, v in constants.items() if k not in positional}
        kwargs["xp"] = xp
        if tuple(positional) == free[: len(positional)] and not set(positional) & set(constants):
            keywords = free[len(positional):]
            if batch is not None:
                if keywords:
                    return lambda w, example: fn(w, **{batch: example}, **kwargs)
                return lambda w, example: fn(w, example, **kwargs)
            return (lambda w: fn(w, **kwargs)) if positional else (lambda w: fn(**{wrt: w}, **kwargs))

        def call(values: dict[str, Any]) -> Any:  # general case: constants among the positional-only parameters
            args = [values.pop(name) for name in positional]
            return fn(*args, **values, xp=xp)

        if batch is not None:
            return lambda w, example: call({wrt: w, batch: example, **constants})
        return lambda w: call({wrt: w, **constants})


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def first_lines(f: Iterable[str], count: int = 2) -> tuple[list[str], ...]:
    """The first `count` non-blank lines of an open text file, each split into words, padded with empty lists when
    the file has fewer: what a header reader (`@<problem>.reads_header`) needs to tell its format from another's
    without reading the body. Blank lines are skipped because ADBench's files have them between sections."""
    lines: list[list[str]] = []
    for line in f:
        if line.strip():
            lines.append(line.split())
            if len(lines) == count:
                break
    return tuple(lines + [[] for _ in range(count - len(lines))])


@functools.lru_cache(maxsize=8)
def read_input_file(problem: Problem, path: str, sha256: str) -> tuple[dict[str, int], Mapping[str, np.ndarray]]:
    """(dims, inputs) from `problem`'s reader, once per file and process; `sha256` guards against a file that
    changed since its cells were planned. Raises OSError or ValueError (the reader's reason)."""
    if problem.reader is None:
        raise ValueError(f"problem {problem.name!r} reads no input files")
    actual = file_sha256(path)
    if sha256 and actual != sha256:
        raise ValueError(f"{path} changed since it was planned (sha256 {actual[:12]}, expected {sha256[:12]})")
    return problem.reader(path)


def _positional_only(fn: Callable[..., Any]) -> tuple[str, ...]:
    params = inspect.signature(fn).parameters.values()
    return tuple(p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_ONLY)


def _cast(value: Any, dtype: str, copy: bool = True) -> Any:
    array = np.asarray(value)
    if np.issubdtype(array.dtype, np.floating):
        return array.astype(dtype, copy=copy)
    return value


class ProblemDefinition:
    """What `@problem` returns: the function plus its options, waiting for `.inputs` to become a `Problem`."""

    def __init__(self, function: Callable[..., Any], options: dict[str, Any]):
        self.function = function
        self.options = options
        self.generator: Callable[..., Mapping[str, np.ndarray]] | None = None
        self.shape_function: Callable[..., Shapes] | None = None
        self.reader: Callable[[str], tuple[dict[str, int], Mapping[str, np.ndarray]]] | None = None
        self.header_reader: Callable[[str], dict[str, int]] | None = None
        self.analytic_forms: dict[str, Callable[..., np.ndarray]] = {}
        self.__doc__ = function.__doc__
        self.__name__ = options["name"]
        self.__wrapped__ = function

    def __repr__(self) -> str:
        return f"<problem {self.__name__}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def inputs(self, generator: Callable[..., Mapping[str, np.ndarray]]):
        """Register the seeded input generator `(rng, **dims) -> {argument: ndarray}`."""
        self._check_dims(generator, "input generator", first="rng")
        self.generator = generator
        return generator

    def shapes(self, function: Callable[..., Shapes]):
        """Declare the shapes from the dimensions, `(**dims) -> Shapes`, so planning materialises nothing.

        Worth it when a size's inputs or output are large (the planner otherwise evaluates the problem through
        NumPy once per size); the test suite checks the declaration against an evaluation at small sizes.
        """
        self._check_dims(function, "shape function", first=None)
        self.shape_function = function
        return function

    def _check_dims(self, function: Callable[..., Any], role: str, first: str | None) -> None:
        name = self.__name__
        params = inspect.signature(function).parameters
        dims = {d for s in self.options["sizes"] for d, _ in s.dims}
        if first and first not in params:
            raise ProblemDefinitionError(
                f"problem {name!r}: {role} {function.__name__!r} must take {first!r} first; "
                f"write def _({first}, {', '.join(sorted(dims))})"
            )
        missing = dims - set(params)
        if missing:
            raise ProblemDefinitionError(
                f"problem {name!r}: {role} lacks the size argument(s) {sorted(missing)}; add them to its parameters"
            )

    def reads(self, reader: Callable[[str], tuple[dict[str, int], Mapping[str, np.ndarray]]]):
        """Register an input-file reader `(path) -> (dims, {argument: ndarray})` for `--inputs PATH`: dims name
        the same dimensions as the sizes; a file it cannot read raises ValueError with the reason."""
        self.reader = reader
        return reader

    def reads_header(self, header_reader: Callable[[str], dict[str, int]]):
        """Register `(path) -> dims`, the dimensions from an input file's header alone: planning sizes a file-fed
        cell with it, so a file whose inputs are large (ADBench's ba20 replicates one row 28,987,644 times) is not
        built until a worker runs it. Without one, planning calls the full reader."""
        self.header_reader = header_reader
        return header_reader

    def analytic(self, operator: str):
        """Register the problem's closed form of `operator`, `(wrt, **constants) -> ndarray` in NumPy float64, for
        the reference where differencing cannot be trusted (kmeans' minimum has kinks closer than a second
        difference's step), or where evaluating the function itself in NumPy costs as much as a framework's call
        (det's ℓ! recursion: its value and gradient by LU). Hand-written, it shares no code with any framework."""
        s = OPERATORS.get(operator)
        if s is None or s.takes or s.per_example:
            raise ProblemDefinitionError(f"problem {self.__name__!r}: analytic forms are for operators of the point "
                                         f"alone (value, grad, hessian, newton_dir, …), not {operator!r}"
                                         f"{closest(operator, OPERATORS) if s is None else ''}")

        def register(function: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
            self.analytic_forms[operator] = function
            return function

        return register

    def build(self) -> Problem:
        name = self.__name__
        if self.generator is None:
            raise ProblemDefinitionError(
                f"problem {name!r} has no input generator; add one with @{name}.inputs"
            )
        o = self.options
        return Problem(
            name=name,
            function=self.function,
            wrt=o["wrt"],
            batch=o["batch"],
            sizes=o["sizes"],
            generator=self.generator,
            tags=o["tags"],
            reader=self.reader,
            header_reader=self.header_reader,
            description=inspect.cleandoc(self.function.__doc__ or ""),
            operators=o["operators"],
            complex_step_safe=o["complex_step_safe"],
            compilable=o["compilable"],
            source=f"{self.function.__module__}.{self.function.__qualname__}",
            shape_function=self.shape_function,
            analytic=tuple(self.analytic_forms.items()),
            more_sizes=o["more_sizes"],
        )


def _sizes(name: str, sizes: Any) -> tuple[Size, ...]:
    if isinstance(sizes, Mapping) or isinstance(sizes, (int, str)) or not sizes:
        raise ProblemDefinitionError(
            f"problem {name!r}: sizes must be a non-empty list of ints or dicts (e.g. sizes=[10, 100] or "
            f"sizes=grid(n=[5, 10], p=[8])), got {sizes!r}"
        )
    out = []
    for s in sizes:
        dims = {"n": s} if isinstance(s, int) and not isinstance(s, bool) else s
        if not isinstance(dims, Mapping) or not dims or not all(
            isinstance(k, str) and k.isidentifier() and isinstance(v, int) and not isinstance(v, bool) and v > 0
            for k, v in dims.items()
        ):
            raise ProblemDefinitionError(
                f"problem {name!r}: bad size {s!r}; a size is a positive int or a dict of positive ints "
                f"such as {{'n': 10, 'p': 256}}"
            )
        out.append(Size(tuple(dims.items())))
    keys = {tuple(k for k, _ in s.dims) for s in out}
    if len(keys) > 1:
        raise ProblemDefinitionError(f"problem {name!r}: every size must name the same dimensions, got {sorted(keys)}")
    return tuple(out)


def problem(
    function: Callable[..., Any] | None = None,
    *,
    sizes: Any,
    wrt: str,
    batch: str | None = None,
    tags: Iterable[str] = (),
    name: str | None = None,
    operators: Iterable[str] | None = None,
    complex_step_safe: bool = False,
    compilable: bool = True,
    more_sizes: str = "",
):
    """Declare a problem. Use as a decorator, then attach inputs with `@<name>.inputs`.

    sizes: list of ints (dimension `n`) or dicts of named dimensions, e.g. `grid(n=[5, 10], p=[8, 16])`.
    wrt: the argument differentiated. batch: the argument whose leading axis the per-example operators map over.
    operators: restrict to these operators (default: every one the output shape admits).
    complex_step_safe: the function is holomorphic where used, so the reference may use the complex step.
    compilable: False when the function has data-dependent Python control flow (compilers must fail it).
    more_sizes: how sizes beyond `sizes` run (e.g. "hand7–hand12 through --inputs FILE"), named in the error when an
    unknown size that looks like this problem's is asked for.
    """

    def decorate(fn: Callable[..., Any]) -> ProblemDefinition:
        pname = name or fn.__name__
        params = inspect.signature(fn).parameters
        if "xp" not in params or params["xp"].kind is not inspect.Parameter.KEYWORD_ONLY:
            raise ProblemDefinitionError(
                f"problem {pname!r}: the function must take the array namespace as keyword-only 'xp' "
                f"(def {fn.__name__}(..., *, xp))"
            )
        for role, arg in (("wrt", wrt), ("batch", batch)):
            if arg is not None and (arg not in params or arg == "xp"):
                raise ProblemDefinitionError(
                    f"problem {pname!r}: {role}={arg!r} is not a parameter of {fn.__name__}; "
                    f"choose one of {[p for p in params if p != 'xp']}"
                )
        if batch is not None and batch == wrt:
            raise ProblemDefinitionError(f"problem {pname!r}: batch and wrt must be different arguments")
        if operators is not None:
            bad = [o for o in operators if o not in OPERATORS]
            if bad:
                raise ProblemDefinitionError(
                    f"problem {pname!r}: unknown operator {bad[0]!r}{closest(bad[0], OPERATORS)}"
                )
        options = dict(
            name=pname,
            sizes=_sizes(pname, sizes),
            wrt=wrt,
            batch=batch,
            tags=tuple(tags),
            operators=tuple(operators) if operators is not None else None,
            complex_step_safe=complex_step_safe,
            compilable=compilable,
            more_sizes=more_sizes,
        )
        return ProblemDefinition(fn, options)

    return decorate(function) if function is not None else decorate


def problems_in(module: ModuleType) -> list[Problem]:
    """Every problem defined at the top level of `module`, built and validated, in definition order."""
    return [v.build() for v in vars(module).values() if isinstance(v, ProblemDefinition)]


def output_shape(problem: Problem, size: Size) -> tuple[int, ...]:
    """Shape of f(wrt) with the whole batch: declared, or found by evaluating through NumPy (see shapes.py)."""
    return shapes_of(problem, size).output


def example_output_shape(problem: Problem, size: Size) -> tuple[int, ...]:
    """Shape of f(wrt, example) for one batch element."""
    return shapes_of(problem, size).example_output or ()


def applicable_operators(problem: Problem, size: Size | None = None) -> list[str]:
    """The problem's operators (its declared subset, or the whole vocabulary) that its output shapes admit."""
    size = size or problem.smallest_size
    out_shape = output_shape(problem, size)
    ex_shape = example_output_shape(problem, size) if problem.batch else None
    return [op for op in (problem.operators or OPERATORS)
            if applicable(op, out_shape=out_shape, example_out_shape=ex_shape, has_batch=problem.batch is not None,
                          declared=problem.operators)
            is None]

# Shapes at one size. A problem may declare them from its dimensions (`@<problem>.shapes`, arithmetic only, nothing
# materialised); otherwise they are found by evaluating it through NumPy at float64 — fine for small sizes, which
# is why the large built-in problems declare theirs (tests/test_problems.py checks each declaration).
_CACHE: dict[tuple, Shapes] = {}


def shapes_of(problem: Problem, size: Size) -> Shapes:
    """The problem's shapes at `size`: declared, or evaluated through NumPy once per (problem, size)."""
    key = (problem.function, problem.generator, problem.shape_function, size)
    if key not in _CACHE:
        if problem.shape_function is not None:
            _CACHE[key] = _normalise(problem.shape_function(**size.as_dict()))
        else:
            _CACHE[key] = evaluated_shapes(problem, size)
    return _CACHE[key]


def evaluated_shapes(problem: Problem, size: Size) -> Shapes:
    """Shapes found by generating the inputs and evaluating the function through NumPy (materialises them)."""
    inputs = problem.inputs(size, "float64")
    w = inputs.pop(problem.wrt)
    out = tuple(np.shape(problem.bind(np, inputs)(w)))
    if problem.batch is None:
        return Shapes(tuple(np.shape(w)), out)
    batch = inputs.pop(problem.batch)
    example = tuple(np.shape(problem.bind(np, inputs)(w, batch[0])))
    return Shapes(tuple(np.shape(w)), out, int(np.shape(batch)[0]), example)


def _normalise(s: Shapes) -> Shapes:
    ex = None if s.example_output is None else tuple(int(v) for v in s.example_output)
    whole = lambda v: None if v is None else int(v)  # noqa: E731
    return Shapes(tuple(int(v) for v in s.wrt), tuple(int(v) for v in s.output), whole(s.batch), ex,
                  whole(s.flops), whole(s.operations))
