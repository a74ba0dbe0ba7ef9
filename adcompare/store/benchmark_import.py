"""Import pytest-benchmark JSON (from `pytest --benchmark-only --benchmark-json F`) as measurements.

Only benchmarks made by adcompare's pytest plugin are accepted: their `extra_info` carries the cell, the check
status, first-call and compile times. Raw per-round times are used when the file has them
(`--benchmark-save-data`); otherwise the median alone is kept and the record says so. Times that cannot be a
measurement (negative, non-finite, none) are refused in one line naming the file, the benchmark and the field
(timing_validity.py).
"""
from __future__ import annotations

import json
from pathlib import Path

from adcompare.model.cell import Cell
from adcompare.model.errors import ResultsFileError
from adcompare.model.measurement import Check, Measurement, Timing
from adcompare.model.status import Status
from adcompare.store.provenance import Provenance
from adcompare.store.timing_validity import timing_problem

REQUIRED = ("adcompare_cell", "status", "first_call", "compile")


def load_benchmark_json(path: Path) -> tuple[Provenance, list[Measurement]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultsFileError(f"{str(path)!r} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict) or "benchmarks" not in data or "machine_info" not in data:
        raise ResultsFileError(f"{str(path)!r} is neither adcompare results (.jsonl) nor pytest-benchmark JSON")
    machine, commit = data.get("machine_info", {}), data.get("commit_info", {})
    provenance = Provenance.from_json({
        "source": "pytest-benchmark (in-process)", "host": machine.get("node"), "python": machine.get("python_version"),
        "cpu": (machine.get("cpu") or {}).get("brand_raw"), "cpu_count": (machine.get("cpu") or {}).get("count"),
        "platform": machine.get("system"), "date": data.get("datetime"), "git_commit": commit.get("id"),
        "pytest_benchmark": data.get("version"),
    })
    measurements = []
    for bench in data["benchmarks"]:
        extra = bench.get("extra_info") or {}
        missing = [k for k in REQUIRED if k not in extra]
        if missing:
            raise ResultsFileError(
                f"{str(path)!r}: benchmark {bench.get('fullname', bench.get('name'))!r} lacks adcompare extra_info "
                f"{missing}; only benchmarks from adcompare's pytest plugin (benchmarks/test_matrix.py) can be "
                "reported")
        stats = bench["stats"]
        raw = stats.get("data")
        details = {"source": "pytest-benchmark", "rounds": stats.get("rounds"), "iterations": stats.get("iterations")}
        if not raw:
            details["samples"] = "median only (run pytest with --benchmark-save-data to keep raw rounds)"
        compile_seconds = extra.get("compile")
        stored = {"samples": raw or [stats.get("median")], "first_call": extra["first_call"],
                  "compile": compile_seconds}
        if why := timing_problem(stored):
            field = why.replace("timing.samples", "stats.data" if raw else "stats.median").replace(
                "timing.", "extra_info.")
            name = bench.get("fullname", bench.get("name"))
            raise ResultsFileError(f"{path}: benchmark {name!r}: {field}; the record cannot be a measurement — "
                                   f"rerun pytest --benchmark-json")
        timing = Timing(samples=tuple(raw or (stats["median"],)), number=int(stats.get("iterations") or 1),
                        first_call=float(extra["first_call"]), compile=compile_seconds,
                        compile_method=extra.get("compile_method", "") if compile_seconds is not None else "")
        measurements.append(Measurement(
            cell=Cell.from_json(extra["adcompare_cell"]), status=Status(extra["status"]),
            support=extra.get("support", ""), algorithm=extra.get("algorithm", ""), timing=timing,
            check=Check.from_json(extra["check"]) if extra.get("check") else None, details=details))
    return provenance, measurements
