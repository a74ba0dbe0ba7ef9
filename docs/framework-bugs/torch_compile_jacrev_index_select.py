"""torch 2.13 (CPU): torch.compile of torch.func.jacrev through index_select gives a wrong Jacobian.

jacrev(lambda x: x.index_select(0, idx)) is the 0/1 selection matrix; compiled (fullgraph=True, dynamic=False, the
default inductor backend) every row comes out as the sum of all rows, the batched index_add of the reverse pass
accumulating across the vmapped cotangents. x[idx] (advanced indexing) is right. Found by adcompare: torch's
compiled jacrev of ht (GradBench's hand tracking), whose array-API `take` is index_select. Exits 1 when the bug
shows.
"""
import sys

import numpy as np
import torch

idx = torch.tensor([0, 0, 1, 2])
x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)


def f(x):
    return x.index_select(0, idx)


expected = np.eye(4)[idx.numpy()]
got = torch.compile(torch.func.jacrev(f), fullgraph=True, dynamic=False)(x).numpy()
wrong = int(np.sum(got != expected))
print(f"torch {torch.__version__}: {wrong} of {expected.size} Jacobian entries wrong")
sys.exit(1 if wrong else 0)
