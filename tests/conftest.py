"""Shared test fixtures. Frameworks run in worker processes (as in real runs), shared across the session."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
FAULTS = str(FIXTURES / "plugins" / "faults.py")


# Scopes (a class, or a module's functions) that take 10 s or more, longest first as measured (a fresh clone's
# README test command, 2 cores). Under the README's `--dist loadscope` they start first, so that the workers' last
# seconds are small scopes that level their ends (longest processing time first); pytest-xdist's own order, by
# test count, started the one-test classes last, leaving one worker busy for minutes while the other idled.
LONGEST_FIRST = (
    "tests/test_matrix.py::TestQuickSuiteFirstHalf", "tests/test_matrix.py::TestQuickSuiteSecondHalf",
    "tests/adapters/test_tensorflow.py", "tests/test_goldens.py::TestTensorflowAdapterGoldens",
    "tests/test_goldens.py::TestJaxAdapterGoldens", "tests/test_conformance.py::TestTorch",
    "tests/test_conformance.py::TestTensorflow", "tests/test_conformance.py::TestJax", "tests/adapters/test_torch.py",
    "tests/test_suite_coverage.py", "tests/test_worker.py", "tests/test_goldens.py::TestTorchAdapterGoldens",
    "tests/test_third_party.py", "tests/test_slurm.py", "tests/test_results.py",
    "tests/adapters/test_torch_data_parallel.py", "tests/test_comparison_rounds.py",
    "tests/adapters/test_tensorflow_data_parallel.py", "tests/test_producers.py", "tests/test_benchmark_plugin.py",
)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's reorder by test count would undo LONGEST_FIRST
        config.option.loadscopereorder = False


def _rank(item: pytest.Item) -> int:
    scope = item.nodeid.split("::")
    for rank, prefix in enumerate(LONGEST_FIRST):
        if "::".join(scope[:prefix.count("::") + 1]) == prefix:
            return rank
    return len(LONGEST_FIRST)


@pytest.fixture(scope="session", autouse=True)
def _run_folder(request, tmp_path_factory):
    """Where tests/shared_results.py keeps what pytest-xdist's workers share: the run's base temporary folder.
    A worker is told by its config (`workerinput`), not by the environment, which a pytest started from a test
    inherits."""
    from .shared_results import RUN_FOLDER

    if hasattr(request.config, "workerinput"):
        RUN_FOLDER[0] = tmp_path_factory.getbasetemp().parent


@pytest.fixture(scope="session")
def registry():
    from adcompare.plugin import registry as plugins

    return plugins.load()


@pytest.fixture(scope="session")
def fault_registry():
    from adcompare.plugin import registry as plugins

    return plugins.load((FAULTS,))


class WholeBatch:
    """The data-parallel operators' expected results for mlp_loss, computed here rather than through reference.py:
    central differences of the whole batch's mean loss, the per-example values, and the seeded projection of
    either (check.py's, for per-example results) that the worker records."""

    def __init__(self, registry) -> None:
        self.problem = registry.problem("mlp_loss")

    def _bound(self, size: str, operator: str):
        from adcompare.verify.cell_inputs import cell_inputs

        inputs = cell_inputs(self.problem, self.problem.size(size), operator, "float64")
        return self.problem.bind(np, dict(inputs.constants)), inputs

    def gradient(self, size: str, h: float = 1e-6) -> np.ndarray:
        fn, inputs = self._bound(size, "pmap_grad")

        def mean_loss(w):
            return float(np.mean([fn(w, b) for b in inputs.batch]))

        x, grad = inputs.wrt, np.zeros_like(inputs.wrt)
        for i in np.ndindex(x.shape):
            step = np.zeros_like(x)
            step[i] = h
            grad[i] = (mean_loss(x + step) - mean_loss(x - step)) / (2 * h)
        return grad

    def values(self, size: str) -> np.ndarray:
        fn, inputs = self._bound(size, "pmap_value")
        return np.array([fn(inputs.wrt, b) for b in inputs.batch])

    @staticmethod
    def assert_gradient_record(record: dict, projection: float) -> int:
        """What every framework's `pmap_grad` record must show: ok, keyed by its device count, equal to the whole
        batch's gradient (its projection, within float64 central differences), timed. Returns the device count."""
        devices = record["cell"]["devices"]
        assert record["status"] == "ok", record["message"]
        assert record["key"].endswith(f"/float64/{devices}dev")
        assert record["check"]["projection"] == pytest.approx(projection, rel=1e-7)
        assert record["timing"]["median"] > 0
        return devices

    @staticmethod
    def projection(result: np.ndarray) -> float:
        """check.py's per-example projection (schema 4), recomputed: Σᵢⱼ aᵢ·bⱼ·Rᵢⱼ over examples i and entries j."""
        from adcompare.verify.check import PROJECTION_SEED

        rng = np.random.default_rng(PROJECTION_SEED)
        by_example, by_entry = rng.standard_normal(result.shape[0]), rng.standard_normal(result[0].size)
        return float(sum(a * np.dot(np.ravel(row), by_entry) for a, row in zip(by_example, result)))


@pytest.fixture(scope="session")
def whole_batch(registry) -> WholeBatch:
    return WholeBatch(registry)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`slow` tests (a compiler unrolling ADBench's 1,023-step LSTM, float64 twins of eager TensorFlow cells) run
    only when asked for with `-m slow` (or any -m expression): the README's test command stays within CI's time.
    The longest scopes go first (LONGEST_FIRST)."""
    items.sort(key=_rank)  # stable: the other scopes, and the tests within a scope, keep their order
    if config.getoption("-m"):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)
