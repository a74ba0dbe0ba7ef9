"""Every built-in adapter against the field's goldens in the normal run — GradBench's evals (tests/test_gradbench.py),
its ht (tests/test_ht.py), ADBench's (tests/test_adbench.py) and the nesting orders (tests/test_nested.py) — all
in one worker process per adapter.

What each module holds, and why, is in its docstring, next to its cases and assertions; this module only runs them.
One process per adapter, not one per module: a framework starts once per test run for all four (TensorFlow's start
is about 5 s of CPU, torch's 2 s), and a fresh interpreter still isolates each adapter (JAX's x64 switch is
process-wide). The slow cases stay in their modules, under `-m slow`.
"""
from __future__ import annotations

import importlib

import pytest

from . import test_adbench, test_gradbench, test_gradbench_tool, test_ht, test_nested
from .per_adapter import evaluate_in_worker, one_class_per_adapter, skip_unless_installed

# name → (the module whose `evaluate` runs the cases, the cases of an adapter)
GOLDENS = {
    "gradbench": ("tests.test_gradbench", lambda adapter: test_gradbench.adapter_cases(adapter, slow=False)),
    "ht": ("tests.test_gradbench", lambda adapter: test_ht.adapter_cases(adapter, slow=False)),
    "adbench": ("tests.test_adbench", test_adbench.normal_cases),
    "nesting": ("tests.test_nested", test_nested.nesting_cases),
    "gradbench_tool": ("tests.test_gradbench_tool",
                       lambda adapter: test_gradbench_tool.adapter_cases(adapter, slow=False)),
}


def evaluate_all(adapter_name: str, cases: dict[str, tuple[str, list]]) -> dict[str, dict[str, object]]:
    """In the worker: each golden set's cases through its module's `evaluate`, one framework start for all."""
    return {name: importlib.import_module(module).evaluate(adapter_name, listed)
            for name, (module, listed) in cases.items()}


class AdapterGoldens:
    """One adapter's goldens, evaluated once per class in one worker (one class per adapter: `--dist loadscope`
    gives each its own test process)."""

    adapter_name = ""

    @pytest.fixture(scope="class")
    @classmethod
    def cases(cls) -> dict[str, list]:
        return {name: cases_of(cls.adapter_name) for name, (_, cases_of) in GOLDENS.items()}

    @pytest.fixture(scope="class")
    @classmethod
    def results(cls, cases) -> dict[str, dict[str, object]]:
        skip_unless_installed(cls.adapter_name)
        request = {name: (GOLDENS[name][0], listed) for name, listed in cases.items()}
        # a safety net: the four sets take 10 s (autograd) to 2 min (TensorFlow) here
        return evaluate_in_worker("tests.test_goldens", cls.adapter_name, request, timeout=3600,
                                  function="evaluate_all")

    def test_gradbench_evals(self, results):
        """Value and gradient of lse, llsq, det, ode (kmeans: value and newton_dir) at every golden size, every
        variant but the slow ones, equal every GradBench tool's."""
        test_gradbench.assert_goldens(results["gradbench"])

    def test_gradbench_ht(self, results):
        """ht's objective at every golden size and its dense Jacobian (jacfwd, jacrev) at the small model's, every
        variant but the slow, equal GradBench's manual tool's."""
        test_ht.assert_goldens(results["ht"])

    def test_adbench(self, results):
        """GMM, BA and LSTM objectives and derivatives equal ADBench's published goldens and its C++'s."""
        test_adbench.assert_adapter_goldens(self.adapter_name, results["adbench"])

    def test_gradbench_tool(self, results):
        """`adcompare gradbench-tool`'s answers to GradBench's own inputs (lse, llsq, det, ode, kmeans, ht) equal
        its golden tool's, in GradBench's layouts, with min_runs timed runs (tests/test_gradbench_tool.py)."""
        test_gradbench_tool.assert_responses(self.adapter_name, results["gradbench_tool"])

    def test_nesting_orders(self, cases, results):
        """Every nesting order and the outer operator differentiate through the inner derivative."""
        test_nested.assert_nesting(cases["nesting"], results["nesting"])


globals().update(one_class_per_adapter(AdapterGoldens))
