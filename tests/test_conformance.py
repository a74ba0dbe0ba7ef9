"""The four built-in adapters pass the same conformance suite a third party runs (adcompare.testing)."""
from __future__ import annotations

from adcompare import plugins
from adcompare.testing import AdapterConformance

REGISTRY = plugins.load()


class TestJax(AdapterConformance):
    adapter = REGISTRY.adapter("jax")


class TestTorch(AdapterConformance):
    adapter = REGISTRY.adapter("torch")


class TestTensorflow(AdapterConformance):
    adapter = REGISTRY.adapter("tensorflow")


class TestAutograd(AdapterConformance):
    adapter = REGISTRY.adapter("autograd")
