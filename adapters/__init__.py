"""Built-in framework adapters, one module per framework, each registered through the `adcompare` entry-point group."""

if __name__ != "adcompare.adapters":  # one module, one name: this folder is installed as adcompare.adapters
    raise ImportError(f"import adcompare.adapters, not {__name__}: the adapters/ folder is installed as "
                      "adcompare.adapters (pip install -e .)")
