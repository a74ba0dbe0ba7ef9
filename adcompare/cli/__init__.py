"""The `adcompare` command line: one module per command, the shared arguments and the terminal tables.

May import every other sub-package; nothing imports it.
"""
