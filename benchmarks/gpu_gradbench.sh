#!/usr/bin/env bash
# Issue 39 item 5, its GPU half: `--suite gradbench --device cuda` for JAX and PyTorch in one device window, with
# the tallies the CPU corpus runs' READMEs give (benchmarks/corpus_tally.py). Goal: >= 300 cells measured.
#
# Prepared for a session whose task is lent a GPU machine (the `device` tool; its `status` says so): its Python has
# CUDA torch and jax and most of our dependencies, no network, no TensorFlow. Here, once, fetch the wheels it lacks
# into the git-ignored .whl/ (pure Python but markupsafe, built for its Python 3.12):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d .whl \
#       autograd array-api-compat pluggy rich markdown-it-py mdurl pygments jinja2 markupsafe
# then one device call: command "bash benchmarks/gpu_gradbench.sh", carry [".whl"], timeout_s 600. The run's
# budget (MAX_TIME, default 8m) leaves the call's 10-minute limit room for the install, the workers' start-ups and
# a cell that ends past the deadline (at most --timeout 30 s). $OUT/gpu-gradbench.jsonl and $OUT/tally.txt come
# back; commit the file under benchmarks/results/ with its machine (the header records it) and the tallies.
set -uo pipefail
MAX_TIME=${MAX_TIME:-8m}
OUT=${OUT:-/tmp/gpu-gradbench}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --find-links .whl autograd array-api-compat pluggy rich jinja2 \
    || { echo "installing the carried wheels failed: carry .whl (see the top of this script)"; exit 2; }
python3 -m pip install -q --no-deps --no-build-isolation -e . || { echo "pip install -e . failed"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -m adcompare list 2>&1 | sed -n 1,9p
python3 -m adcompare run --suite gradbench --device cuda --adapter jax,torch --max-time "$MAX_TIME" --timeout 30 \
    --no-progress -o "$OUT/gpu-gradbench.jsonl" 2>&1 | tail -40
echo "run: exit $?"
python3 benchmarks/corpus_tally.py "$OUT/gpu-gradbench.jsonl" | tee "$OUT/tally.txt"
