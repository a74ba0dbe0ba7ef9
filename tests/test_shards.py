"""Shards: deterministic, balanced by estimated cost, worker groups kept whole where balance allows, and the union
of all shards is the unsharded plan with no cell twice (on the full suite's real plan)."""
from __future__ import annotations

import json
import statistics
from collections import defaultdict

import pytest

from adcompare.cli.main import main
from adcompare.model.errors import UsageError
from adcompare.study.estimate import estimate
from adcompare.study.plan import Selection
from adcompare.study.plan import plan as make_plan
from adcompare.study.scope import prepare
from adcompare.study.shards import ShardSpec, assign, shard_seconds, units


@pytest.fixture(scope="module")
def full(registry):
    return make_plan(registry, Selection(suite="full"))


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_the_union_of_all_shards_is_the_plan_with_no_cell_twice(registry, full, n):
    ran, decided = [], []
    for k in range(1, n + 1):
        st = prepare(registry, full, shard=ShardSpec(k, n))
        ran += [c.key for c in st.plan.cells]
        decided += [m.cell.key for m in st.plan.decided]
    assert len(ran) == len(set(ran)) and set(ran) == {c.key for c in full.cells}
    assert len(decided) == len(set(decided)) and set(decided) == {m.cell.key for m in full.decided}


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_no_shard_of_the_full_suite_costs_over_one_and_a_half_times_the_mean(registry, full, n):
    per_shard = shard_seconds(full.cells, estimate(registry, full.cells), n)
    assert max(per_shard) <= 1.5 * statistics.mean(per_shard), per_shard


def test_shards_are_deterministic(registry, full):
    a = prepare(registry, full, shard=ShardSpec(2, 4)).plan.cells
    b = prepare(registry, full, shard=ShardSpec(2, 4)).plan.cells
    assert a == b and a


def test_a_shard_is_the_same_cells_with_or_without_a_time_budget(registry):
    """`--shard 2/4 --max-time 1h`, then `--shard 2/4 --resume` without it, must run one slice: the split is
    modelled under one policy, whatever the budget's (which times slow cells with fewer calls). ADBench's
    suite has slow cells enough to move a split that followed the policy."""
    adbench = make_plan(registry, Selection(suite="adbench"))
    for k in (1, 2):
        plain = prepare(registry, adbench, shard=ShardSpec(k, 4)).plan.cells
        budgeted = prepare(registry, adbench, shard=ShardSpec(k, 4), max_time="1h").plan.cells
        assert plain == budgeted and plain


def test_worker_groups_stay_whole_unless_one_costs_more_than_half_a_shard(registry, full):
    est = estimate(registry, full.cells)
    n = 4
    groups = defaultdict(list)
    for c in full.cells:
        groups[c.worker_group].append(c)  # one worker process each (a device count starts its own)
    half_shard = sum(est.group_seconds(g) for g in groups.values()) / n / 2
    shard_of = {c.key: i for i, shard in enumerate(assign(full.cells, est, n)) for u in shard for c in u.cells}
    for key, cells in groups.items():
        if est.group_seconds(cells) <= half_shard:
            assert len({shard_of[c.key] for c in cells}) == 1, key
    split = [u for u in units(full.cells, est, n) if u.seconds > half_shard]
    assert all(len(u.cells) == 1 for u in split)  # only a single cell can exceed the cap


def test_shard_option_lists_a_slice_and_rejects_nonsense(capsys):
    argv = ["run", "--problem", "exp_dot_loss", "--suite", "full", "--dry-run", "--json", "-o", "/nonexistent/x"]
    assert main(argv) == 0
    whole = {row["key"] for row in json.loads(capsys.readouterr().out)["cells"]}
    parts = []
    for k in (1, 2, 3):
        assert main([*argv, "--shard", f"{k}/3"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["shard"] == f"{k}/3"
        parts.append({row["key"] for row in out["cells"]})
    assert set().union(*parts) == whole and sum(map(len, parts)) == len(whole)
    for bad in ("0/3", "4/3", "2", "a/b"):
        with pytest.raises(UsageError, match="--shard"):
            ShardSpec.parse(bad)
