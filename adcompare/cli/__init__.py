"""The `adcompare` command line: main (the parser and the dispatch; the console script), arguments (every option,
and the allow-list a shard's own run repeats), one module per command — inventory (`list`), check, run, report,
compare — pipeline (the steps they share: registry, plan, provenance, execution with a progress bar) and tables
(what the terminal shows).

May import every other sub-package; nothing imports it.
"""
