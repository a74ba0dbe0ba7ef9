"""jaxlib 0.10.2 on CPU: jit gives wrong float32 values for two broadcast-multiply reductions in one fusion.

XLA fuses sum(b * T, -1) - sum(a * T, -1), with a and b broadcast along T's leading axis, into one YNNPACK
reduce fusion (`__ynn_fusion`); from row 256 on its float32 results are wrong. Found by adcompare: JAX's compiled
jacrev of bundle_adjustment (n5-m50-p300, float32) has error 1.0 through this very fusion. Exits 1 when the bug
shows. Workaround: XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-LIBRARY_FUSION_TYPE_REDUCE.
"""
import sys

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np

rng = np.random.default_rng(0)
T = jnp.asarray(rng.standard_normal((512, 128, 3)), jnp.float32)
a = jnp.asarray(rng.standard_normal((128, 3)), jnp.float32)
b = jnp.asarray(rng.standard_normal((128, 3)), jnp.float32)


def f(T, a, b):
    return jnp.sum(b * T, axis=-1) - jnp.sum(a * T, axis=-1)


expected = np.einsum("bpk,pk->bp", np.float64(T), np.float64(b) - np.float64(a))
got = np.asarray(jax.jit(f)(T, a, b), dtype=np.float64)
wrong = np.argwhere(np.abs(got - expected) > 1e-4 * (1 + np.abs(expected)))
print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}: {len(wrong)} of {got.size} wrong"
      + (f", first at row {wrong[0][0]}" if len(wrong) else ""))
sys.exit(1 if len(wrong) else 0)
