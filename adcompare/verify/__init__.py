"""Is a derivative right: the float64 reference, the cells' inputs, the checks, the tolerance policy and
the known framework bugs.

Imports adcompare.model and adcompare.plugin.
"""
