"""What to run: suites, the plan of cells, memory pre-flight, wall-time estimates, budgets, shards and
environments.

Imports adcompare.model, .plugin, .verify and .store.
"""
