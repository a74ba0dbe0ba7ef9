"""`--executor local`: the shards run one after another as processes and merge into --output; a shard whose job
died keeps its finished cells and `--resume` runs only the rest; `adcompare report shard*.jsonl` merges shards."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

from adcompare.cli.main import main
from adcompare.store.results import load

SELECTION = ["--problem", "f_xy,f_r2_r3", "--adapter", "autograd", "--dtype", "float32", "--suite", "full"]


def adcompare(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adcompare", *argv], capture_output=True, text=True, timeout=900)


def cell_records(path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()[1:]) if r.get("record") == "cell"]


def test_local_shards_merge_resume_and_report(tmp_path, capsys):
    out = tmp_path / "study.jsonl"
    plan = adcompare("run", *SELECTION, "--dry-run", "--json", "-o", str(out))
    planned = {row["key"] for row in json.loads(plan.stdout)["cells"]}

    done = adcompare("run", *SELECTION, "--executor", "local", "--shards", "2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    shards = sorted((tmp_path / "study.jsonl.shards").glob("shard-*-of-2.jsonl"))
    assert len(shards) == 2
    merged = load([out])
    assert {m.cell.key for m in merged.measurements} == planned
    assert all(m.machine in {x.id for x in merged.machines} for m in merged.measurements)

    # A job that died after two cells: its file keeps those; --resume reruns only the rest of that shard.
    lines = shards[0].read_text().splitlines()
    cells = [i for i, line in enumerate(lines) if line.startswith('{"record": "cell"')]
    kept = lines[: cells[1] + 1]
    lost = {json.loads(lines[i])["key"] for i in cells[2:]}
    assert lost, "the first shard has more than two cells"
    shards[0].write_text("\n".join(kept) + "\n")
    untouched = shards[1].read_text()
    done = adcompare("run", *SELECTION, "--executor", "local", "--shards", "2", "--resume", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert shards[1].read_text().startswith(untouched)
    counts = Counter(r["key"] for r in cell_records(shards[0]))
    assert all(n == 1 for n in counts.values()) and lost <= set(counts)
    assert {m.cell.key for m in load([out]).measurements} == planned

    # The report reads the shard files as one study.
    report = tmp_path / "report"
    assert main(["report", *map(str, shards), "-o", str(report)]) == 0
    assert (report / "index.html").exists()
    assert {m.cell.key for m in load(shards).measurements} == planned
