"""jaxlib 0.10.2 on CPU: jit of a JVP through a batched matmul with a broadcast operand is wrong (float32).

The jitted JVP of sum((L @ (xᵀ − μ))²) (GMM's Mahalanobis term) is one YNNPACK reduce fusion (`__ynn_fusion`):
two batched dots of broadcast operands, a multiply and a full reduce. With 1,000 points it returns NaN on most
runs and a value of order 1e16 on some, with 499 points a value of order 1e28; eager JAX is right. Exits 1 when
the bug shows. Workaround: XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-LIBRARY_FUSION_TYPE_REDUCE.
"""
import sys

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np

rng = np.random.default_rng(0)
L = jnp.asarray(rng.standard_normal((5, 2, 2)), jnp.float32)
x = jnp.asarray(rng.standard_normal((1000, 2)), jnp.float32)
mu = jnp.asarray(rng.standard_normal((5, 2)), jnp.float32)
v = jnp.asarray(rng.standard_normal((5, 2)), jnp.float32)


def jvp(mu, v):
    return jax.jvp(lambda m: jnp.sum((L @ (x.T[None] - m[..., None])) ** 2), (mu,), (v,))[1]


L64, x64, mu64, v64 = (np.asarray(t, np.float64) for t in (L, x, mu, v))
expected = np.sum(2 * (L64 @ (x64.T[None] - mu64[..., None])) * (L64 @ -v64[..., None]))  # exact derivative
got = float(jax.jit(jvp)(mu, v))
wrong = not abs(got - expected) <= 1e-4 * (1 + abs(expected))  # `not <=` catches NaN
print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}: jit jvp {got}, expected {expected:.6g}")
sys.exit(1 if wrong else 0)
