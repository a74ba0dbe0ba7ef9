"""How frameworks and problems plug in: the Adapter contract, the hook specifications and the registry
that loads built-in and third-party plugins alike.

Imports adcompare.model only.
"""
