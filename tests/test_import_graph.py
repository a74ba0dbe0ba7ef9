"""Imports point one way: the sub-packages follow the pipeline (model → plugin → verify → store → study → run →
analysis → report → cli), no cycle between modules, none hidden under `if TYPE_CHECKING:`, and frameworks only
inside adapters' functions. What lazy imports protect (start-up time) is tested where it shows: test_import.py.

Every `import` and `from ... import` in adcompare/, adapters/ and problems/ is parsed with `ast`, those inside
functions included, so a cycle hidden by a function-level import still counts as a cycle.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"adcompare": "adcompare", "adapters": "adcompare.adapters", "problems": "adcompare.problems"}
# Imported inside functions of adcompare.adapters.* only: a framework loads in the worker that runs its cells.
FRAMEWORKS = frozenset({"jax", "torch", "tensorflow", "autograd", "array_api_compat"})
# The sub-packages in pipeline order: each imports only those before it (and itself). The public modules at the top
# (adcompare, adcompare.testing, adcompare.pytest_plugin, adcompare.worker, adcompare.__main__) may import any.
PIPELINE = ("model", "plugin", "verify", "store", "study", "run", "analysis", "report", "cli")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (an adcompare module, or an external one as written)
    line: int
    in_function: bool
    type_only: bool = False  # under `if TYPE_CHECKING:`


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> list[Import]:
    """Every import statement of one module, resolved to module names; `from pkg import sub` names the submodule."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def resolve(target: str) -> str:
        while target not in known and "." in target and target.split(".")[0] == "adcompare":
            target = target.rpartition(".")[0]
        return target

    def visit(node: ast.AST, in_function: bool, type_only: bool = False) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend(Import(name, resolve(a.name), child.lineno, in_function, type_only)
                             for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[:len(package.split(".")) - (child.level - 1)]
                    base = ".".join(up + ([child.module] if child.module else []))
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.append(Import(name, sub if sub in known else resolve(base), child.lineno, in_function,
                                        type_only))
            guarded = isinstance(child, ast.If) and ast.unparse(child.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)),
                  type_only or guarded)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def all_imports() -> list[Import]:
    mods = modules()
    return [i for name, path in mods.items() for i in imports_of(name, path, set(mods))]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def layer(module: str) -> int | None:
    """The pipeline position of an adcompare sub-package module; None for the public top-level modules and plugins."""
    parts = module.split(".")
    return PIPELINE.index(parts[1]) if len(parts) > 1 and parts[0] == "adcompare" and parts[1] in PIPELINE else None


def test_the_parser_sees_module_and_function_level_imports():
    found = {(i.module, i.target, i.in_function) for i in all_imports()}
    assert ("adcompare.verify.check", "adcompare.verify.reference", False) in found
    assert ("adcompare.adapters.jax", "jax", True) in found
    assert ("adcompare.adapters.jax", "adcompare", False) in found  # `from adcompare import hookimpl`


def test_cycle_finder_finds_a_cycle_through_three_modules():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_adcompare_modules():
    edges: dict[str, set[str]] = {}
    for i in all_imports():
        if i.target.startswith("adcompare") and i.target != i.module and not i.type_only:
            edges.setdefault(i.module, set()).add(i.target)
    assert cycles(edges) == []


def test_no_import_hides_from_the_type_checker():
    """A cycle the type checker would see is still a cycle: no `if TYPE_CHECKING:` import of adcompare modules."""
    assert [f"{i.module}:{i.line}" for i in all_imports() if i.type_only and i.target.startswith("adcompare")] == []


def test_sub_packages_import_only_earlier_ones_in_the_pipeline():
    upward = [f"{i.module}:{i.line} imports {i.target}" for i in all_imports()
              if layer(i.module) is not None and i.target.startswith("adcompare.")
              and (layer(i.target) is None and i.target.split(".")[1] not in ("adapters", "problems")
                   or layer(i.target) is not None and layer(i.target) > layer(i.module))]
    assert upward == []


def test_layer_reads_the_package_of_a_module():
    assert layer("adcompare.model.cell") == 0 and layer("adcompare.cli.main") == len(PIPELINE) - 1
    assert layer("adcompare.report") == PIPELINE.index("report")
    assert layer("adcompare.testing") is None and layer("adcompare.adapters.jax") is None


def test_frameworks_are_imported_only_inside_adapter_functions():
    """The parent process never loads a framework: only an adapter's methods, run in the worker, import one."""
    found = [f"{i.module}:{i.line} imports {i.target}" for i in all_imports()
             if i.target.split(".")[0] in FRAMEWORKS
             and not (i.in_function and i.module.startswith("adcompare.adapters."))]
    assert found == []


def calls_of(function: str) -> set[str]:
    """The modules of adcompare/, adapters/ and problems/ that call `function` by name (plain or attribute)."""
    found = set()
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if called == function:
                    found.add(name)
    return found


def test_measurements_are_finished_in_one_place():
    """Cross-checking and the expectation labels happen where measurements are made or loaded, through
    verify/finish.py (the run session labels each record as it is written, too): nothing downstream re-checks or
    relabels, so a consumer of a session's or a loaded file's measurements holds them finished."""
    assert calls_of("cross_check") == {"adcompare.verify.finish"}
    assert calls_of("labelled") == {"adcompare.verify.finish", "adcompare.run.session"}
    assert calls_of("finished") == {"adcompare.run.session", "adcompare.store.results"}


def test_report_modules_render_only_and_take_data_types_from_analysis():
    """report/ draws what analysis/ computed (analysis/report_sections.py): a report module imports nothing from
    verify/, and from analysis/ only data types and constants — no function, no whole module to call into."""
    import importlib
    import inspect

    found = []
    for name, path in modules().items():
        if not name.startswith("adcompare.report"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [f"{name}:{node.lineno} imports {a.name}" for a in node.names
                          if a.name.startswith(("adcompare.analysis", "adcompare.verify"))]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("adcompare.verify"):
                found.append(f"{name}:{node.lineno} imports from {node.module}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("adcompare.analysis"):
                source = importlib.import_module(node.module or "")
                for alias in node.names:
                    value = getattr(source, alias.name)
                    if inspect.ismodule(value) or inspect.isroutine(value):
                        found.append(f"{name}:{node.lineno} imports {node.module}.{alias.name}")
    assert found == []
