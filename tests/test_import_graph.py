"""Imports point one way: no cycle between adcompare modules, and no function-level import except those on
`ALLOWED_IN_FUNCTIONS`, each with its reason (start-up cost, never to hide a cycle).

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
LAZY_CLI = "the CLI loads a command's modules only when that command runs: `adcompare --help` stays fast"
LAZY_PYTEST = ("pytest loads the plugin into every session through its entry point; the core loads only when a "
               "test asks for the benchmark matrix")
ALLOWED_IN_FUNCTIONS: dict[tuple[str, str], str] = {
    ("adcompare.cli.main", "adcompare.cli.commands"): LAZY_CLI,
    ("adcompare.cli.main", "rich.markup"): LAZY_CLI,
    ("adcompare.cli.commands", "adcompare.report"): LAZY_CLI + " (the report builder loads jinja2)",
    ("adcompare.pytest_plugin", "adcompare.study.plan"): LAZY_PYTEST,
    ("adcompare.pytest_plugin", "adcompare.plugin.registry"): LAZY_PYTEST,
    ("adcompare.pytest_plugin", "adcompare.run.benchmark_cell"): LAZY_PYTEST,
    ("adcompare.pytest_plugin", "adcompare.verify.expectations"): LAZY_PYTEST,
    ("adcompare.pytest_plugin", "adcompare.model.status"): LAZY_PYTEST,
    ("adcompare.cli.commands", "adcompare.analysis.findings"): LAZY_CLI + " (importing adcompare.report loads jinja2)",
    ("adcompare.report.page", "adcompare.report.paper"): "matplotlib is an optional extra, loaded only for --figures",
    ("adcompare.analysis.significance", "scipy.stats"): "scipy.stats takes about a second to import; only rank tests need it",
    ("adcompare.run.executors", "submitit"): "an optional extra (adcompare[slurm]), imported when --executor slurm asks",
}
# `if TYPE_CHECKING:` imports never run: they give type checkers the names of annotations. They are left out of
# the import graph, and each is listed here with its reason, so none hides a runtime dependency.
TYPE_ONLY: dict[tuple[str, str], str] = {
    ("adcompare.model.shapes", "adcompare.model.problem"): "shapes_of's annotations; problem.py imports shapes at run time",
    ("adcompare.model.operators", "adcompare.model.shapes"): "minimum_elements' annotation; operators needs no Shapes value",
}


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


def allowed(i: Import) -> bool:
    framework = i.target.split(".")[0] in FRAMEWORKS and i.module.startswith("adcompare.adapters.")
    return framework or (i.module, i.target) in ALLOWED_IN_FUNCTIONS


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


def test_type_checking_imports_are_the_listed_ones():
    found = {(i.module, i.target) for i in all_imports() if i.type_only and i.target.startswith("adcompare")}
    assert found == set(TYPE_ONLY)


def test_function_level_imports_are_only_the_allowed_lazy_ones():
    hidden = [f"{i.module}:{i.line} imports {i.target} inside a function" for i in all_imports()
              if i.in_function and not allowed(i)]
    assert hidden == []


def test_every_allowed_function_level_import_still_exists():
    used = {(i.module, i.target) for i in all_imports() if i.in_function}
    assert [key for key in ALLOWED_IN_FUNCTIONS if key not in used] == []
