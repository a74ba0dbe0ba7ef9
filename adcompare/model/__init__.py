"""The data model: what a problem, an operator, a cell and a measurement are, and the machine that timed it.

Imports nothing else of adcompare; every other sub-package imports it.
"""
