"""Built-in framework adapters, one module per framework, each registered through the `adcompare` entry-point group."""
