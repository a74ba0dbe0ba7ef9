"""What the measurements say, without rendering anything (no jinja2): bootstrap intervals, significance,
comparisons between runs, rankings, findings, compile cost, J/O and correctness.

Imports adcompare.model, .plugin, .verify, .store and .study.
"""
