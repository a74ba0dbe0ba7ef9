"""Results on disk: the JSON Lines results file, where it may be written, which records are valid,
pytest-benchmark JSON import and the provenance header.

Imports adcompare.model, .plugin and .verify.
"""
