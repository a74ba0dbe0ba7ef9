"""The adapter conformance suite. An adapter author runs it by subclassing one class in their own tests:

    from adcompare.testing import AdapterConformance
    from my_package import MyAdapter

    class TestMyAdapter(AdapterConformance):
        adapter = MyAdapter()

It checks, on small built-in problems: availability reporting; that the namespace covers every name the built-in
problems use, with NumPy's values; declared support against actual behaviour for every operator and variant, in
float32 and float64, through worker processes as in a real run (a supported cell runs, has the declared shape and
dtype, and agrees with the float64 reference; an unsupported one says why and refuses to prepare); and that
`sync` really blocks. The adapter must be registered (an entry point in the `adcompare` group, or a file named in
`plugins`), since workers find adapters by name. In-process checks use float32 only: JAX's x64 switch is
process-wide.
"""
from __future__ import annotations

import time
from typing import ClassVar

import numpy as np
import pytest

from . import plugins
from .adapter import Adapter, Availability
from .execution import run_once
from .namespace_probes import PROBES, probe_input, used_names
from .operators import OPERATORS, spec
from .runner import STANDARD_VARIANTS
from .status import Status

DTYPE = "float32"  # in-process checks (namespace, sync); operator behaviour runs both dtypes in workers
DTYPES = ("float32", "float64")
SLOW_VARIANT_OPERATORS = ("grad", "jacrev")


def problem_for(operator: str) -> str:
    """A small built-in problem the operator applies to: scalar output, vector output, or per-example."""
    s = spec(operator)
    if s.per_example:
        return "linear_layer_rowsum" if s.scalar_output else "linear_layer"
    return "exp_dot_loss" if s.scalar_output else "f_r2_r3"


class AdapterConformance:
    """Subclass with `adapter = YourAdapter()`; pytest collects the `test_*` methods."""

    adapter: ClassVar[Adapter]
    plugins: ClassVar[tuple[str, ...]] = ()  # --plugin files/modules registering the adapter, if no entry point

    @pytest.fixture(scope="class", autouse=True)
    def _setup(self):
        if not self.adapter.available().installed:
            pytest.skip(f"{self.adapter.name}: {self.adapter.available().reason}")
        self.adapter.setup(dtype=DTYPE, device="cpu", threads=1)

    @pytest.fixture(scope="class")
    def registry(self):
        return plugins.load()

    def variants(self) -> list[str]:
        return list(dict.fromkeys((*STANDARD_VARIANTS, *self.adapter.variants)))

    def test_availability_is_reported(self):
        avail = self.adapter.available()
        assert isinstance(avail, Availability)
        assert avail.installed or avail.reason, "an unavailable adapter must say why"
        assert self.adapter.name and isinstance(self.adapter.name, str)
        assert self.adapter.device_unavailable("cpu") is None, "every adapter must run on the CPU"

    def test_namespace_covers_the_builtin_problems(self, registry):
        xp = self.adapter.namespace()
        needed = used_names(p for p in registry.problems.values() if p.source.startswith("adcompare.problems."))
        missing = []
        for name in sorted(needed):
            target = xp
            for part in name.split("."):
                target = getattr(target, part, None)
            if target is None:
                missing.append(name)
        assert not missing, f"{self.adapter.name}'s namespace lacks {missing}"

    def test_namespace_values_match_numpy(self, registry):
        xp = self.adapter.namespace()
        needed = used_names(p for p in registry.problems.values() if p.source.startswith("adcompare.problems."))
        x = probe_input(DTYPE)
        for name in sorted(needed & set(PROBES)):
            got = self._to_numpy(PROBES[name](self._asarray(x), xp))
            want = PROBES[name](x.astype("float64"), np)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"xp.{name}")

    @pytest.fixture(scope="class")
    def behaviour(self, registry):
        """Every operator × variant × dtype on a small problem, run through worker processes like a real run:
        a crash in compiled code costs one cell, not the test session. Slow variants (e.g. torch.compile) run
        grad and jacrev only; their other operators are checked for a declared algorithm or reason."""
        from .cell import Cell
        from .runner import Plan, RunOptions, run

        name = self.adapter.name
        if name not in registry.adapters:
            pytest.fail(f"adapter {name!r} is not registered: add an entry point in the 'adcompare' group "
                        f"(or list the file in `plugins`)")
        cells = []
        for operator in OPERATORS:
            problem = registry.problem(problem_for(operator))
            for variant in self.variants():
                if variant in self.adapter.slow_variants and operator not in SLOW_VARIANT_OPERATORS:
                    continue
                for dtype in DTYPES:
                    cells.append(Cell(problem.name, problem.smallest_size.label, operator, name, variant, "cpu",
                                      dtype))
        options = RunOptions(timeout=300, threads=1, time_it=False)
        return {m.cell: m for m in run(plugins.load(self.plugins), Plan(tuple(cells), ()), options)}

    @pytest.mark.parametrize("operator", list(OPERATORS))
    def test_declared_support_matches_behaviour(self, behaviour, operator):
        for variant in self.variants():
            cap = self.adapter.capability(operator, variant)
            if not cap.supported:
                assert cap.reason, f"{operator}/{variant}: unsupported without a reason"
            else:
                assert cap.algorithm, f"{operator}/{variant}: supported without an algorithm"
        for cell, m in behaviour.items():
            if cell.operator != operator:
                continue
            cap = self.adapter.capability(operator, cell.variant)
            if not cap.supported:
                assert m.status is Status.UNSUPPORTED and m.message == cap.reason
                continue
            assert m.status is Status.OK, f"{cell.id}: declared {cap.support.value} but {m.status.value}: {m.message}"
            assert m.check.output_dtype == cell.dtype, f"{cell.id}: returned {m.check.output_dtype}"

    def test_unsupported_operators_refuse_to_prepare(self, registry):
        for operator in OPERATORS:
            for variant in self.variants():
                if not self.adapter.capability(operator, variant).supported:
                    with pytest.raises(Exception) as info:
                        run_once(self.adapter, registry.problem(problem_for(operator)), operator, DTYPE,
                                 variant=variant)
                    assert str(info.value), f"{operator}/{variant}: refused without a message"

    def test_sync_blocks(self, registry):
        """After `sync` returns, the result is ready: converting it costs far less than computing it."""
        problem = registry.problem("exp_dot_loss")
        operator = next(op for op in ("jacrev", "grad", "value") if self.adapter.capability(op, "eager").supported)
        prepared, _, _, _ = run_once(self.adapter, problem, operator, DTYPE, size=problem.size("n1000"))
        computing, converting = [], []
        for _ in range(5):
            start = time.perf_counter()
            out = prepared.run()
            self.adapter.sync(out)
            middle = time.perf_counter()
            self.adapter.to_numpy(out)
            computing.append(middle - start)
            converting.append(time.perf_counter() - middle)
        assert np.median(converting) <= max(0.5 * np.median(computing), 2e-4), (
            f"to_numpy after sync took {np.median(converting):.2e} s vs {np.median(computing):.2e} s for the work: "
            "sync does not wait for the computation")

    def _asarray(self, x: np.ndarray):
        return self.adapter.namespace().asarray(x)

    def _to_numpy(self, value) -> np.ndarray:
        return np.asarray(self.adapter.to_numpy(value), dtype="float64")
