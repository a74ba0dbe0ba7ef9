"""Running a plan: worker processes, the parent↔worker protocol, the in-process cell core, timing,
memory, rounds and executors (local, SLURM).

Imports adcompare.model, .plugin, .verify, .store and .study.
"""
