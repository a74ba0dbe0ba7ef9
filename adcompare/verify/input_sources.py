"""Inputs from outside: `--inputs PATH` (upstream data files, e.g. ADBench's) and `--seed N` (generated inputs).

Both become sizes of the problems they feed (see `Size`): a file a problem's reader accepts replaces that
problem's generated sizes by one size whose dimensions come from the file's header and whose label joins them with
the file's stem and sha256 prefix; a seed other than 0 re-labels every generated size `…-seedN`. Either way the
cells' keys differ from the default ones, so resume, merge and the reference cache never mix them. The parent and
every worker apply the same files and seed to the same problems (`with_inputs`), so a size label names the same
arrays in both.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from adcompare.model.errors import UsageError
from adcompare.model.problem import Problem, Size, file_sha256, read_input_file
from adcompare.plugin.registry import Registry


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def file_size(problem: Problem, path: str) -> Size:
    """The size `problem` reads from `path`; ValueError (the reader's reason) when the file is not its input.

    Only the file's header is read where the problem registers a header reader: planning builds no inputs (ba20's
    header names 28,987,644 observations in 188 bytes). A body that does not match its header fails the cells
    that read it, in the worker, with the reader's message naming the file."""
    sha = file_sha256(path)
    if problem.header_reader is not None:
        dims = problem.header_reader(path)
    else:
        dims, _ = read_input_file(problem, path, sha)
    declared = [name for name, _ in problem.sizes[0].dims]
    if sorted(dims) != sorted(declared):
        raise ValueError(f"the reader gave dimensions {sorted(dims)}, expected {declared}")
    return Size(tuple((name, int(dims[name])) for name in declared), source=path, sha256=sha)


def _readable(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--inputs {path}: no such file; give the path of an input file such as ADBench's "
                         f"data/gmm/test.txt")
    try:
        with p.open("rb") as f:
            f.read(1)
    except OSError as exc:
        raise UsageError(f"--inputs {path}: cannot be read ({_one_line(exc)}); check its permissions") from exc
    return str(p.resolve())


def with_inputs(registry: Registry, paths: Sequence[str] = (), seed: int = 0) -> Registry:
    """`registry` with each problem that reads one of `paths` sized by those files only, and every other
    problem's generated sizes seeded with `seed`. A file no problem reads is refused (UsageError, exit 2)."""
    if not paths and not seed:
        return registry
    resolved = [_readable(p) for p in paths]
    fed: dict[str, list[Size]] = {}
    for path, given in zip(resolved, paths):
        reasons = []
        for problem in registry.problems.values():
            if problem.reader is None:
                continue
            try:
                fed.setdefault(problem.name, []).append(file_size(problem, path))
            except (OSError, ValueError, IndexError, KeyError) as exc:
                reasons.append(f"{problem.name}: {_one_line(exc)}")
        if not any(s.source == path for sizes in fed.values() for s in sizes):
            readers = ", ".join(n for n, p in registry.problems.items() if p.reader) or "none"
            raise UsageError(f"--inputs {given}: no problem reads this file ({'; '.join(reasons) or 'no reader'}); "
                             f"problems that read input files: {readers}")
    problems = {}
    for name, problem in registry.problems.items():
        if name in fed:
            unique: dict[str, Size] = {}
            for size in fed[name]:  # one per label (the same file twice, or same stem and bytes elsewhere)
                unique.setdefault(size.label, size)
            sizes = tuple(unique.values())
        else:
            sizes = tuple(dataclasses.replace(s, seed=seed) for s in problem.sizes)
        problems[name] = dataclasses.replace(problem, sizes=sizes)
    return dataclasses.replace(registry, problems=problems, inputs=tuple(resolved), seed=seed)


def file_fed(registry: Registry, names: Sequence[str] = ()) -> tuple[str, ...]:
    """The problems (among `names`, default all) whose sizes come from input files."""
    return tuple(n for n, p in registry.problems.items()
                 if (not names or n in names) and any(s.source for s in p.sizes))


def check_selected(registry: Registry, names: Sequence[str]) -> None:
    """Refuse `--inputs` files that none of the problems named with `--problem` reads (exit 2)."""
    for path in registry.inputs:
        readers = [n for n, p in registry.problems.items() if any(s.source == path for s in p.sizes)]
        if names and not set(readers) & set(names):
            raise UsageError(f"--inputs {path}: not an input of {', '.join(names)} (it is read by "
                             f"{', '.join(readers)}); add --problem {readers[0]} or drop the file")
