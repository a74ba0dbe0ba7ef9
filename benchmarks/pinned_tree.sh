#!/bin/bash
# A git worktree of COMMIT at DIR that runs its own code whole, for long benchmark runs beside development:
#
#     bash benchmarks/pinned_tree.sh 1ce5d31 /work/pinned
#     cd /work/pinned && PYTHONPATH=/work/pinned python -m adcompare run --suite gradbench ...
#
# Why the links: `pip install -e .` maps `adcompare.problems` and `adcompare.adapters` (problems/ and adapters/,
# package_dir in pyproject.toml) to the checkout it was run in, by an import finder that PYTHONPATH does not
# override. With PYTHONPATH alone, a worktree's run imports its own `adcompare` but the problems and adapters of
# the editable checkout, as they are at each worker's start: on 2026-11-28 a commit there that the pinned
# `adcompare` could not load failed every cell of the workers started after it. The two links put the worktree's
# own folders inside its `adcompare`, where Python's path search finds them first.
set -euo pipefail
commit=${1:?usage: pinned_tree.sh COMMIT DIR}
dir=${2:?usage: pinned_tree.sh COMMIT DIR}
git worktree add --detach "$dir" "$commit"
ln -sfn ../problems "$dir/adcompare/problems"
ln -sfn ../adapters "$dir/adcompare/adapters"
cd /tmp
found=$(PYTHONPATH="$dir" python -c 'import adcompare.problems as p, adcompare.adapters as a; print(p.__file__, a.__file__)')
case "$found" in
  "$dir"/adcompare/problems/*" $dir"/adcompare/adapters/*) echo "pinned: $dir at $(git -C "$dir" rev-parse --short HEAD)";;
  *) echo "pinned_tree.sh: $dir still imports problems/adapters from elsewhere: $found" >&2; exit 1;;
esac
