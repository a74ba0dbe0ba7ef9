"""References shared by a run's workers: each float64 reference differenced once per run, not once per worker.

A reference depends only on the problem, its size, the operator, the cell's dtype, the point (its inputs' digest)
and the budget, never on the framework, yet each worker (one per adapter, and a fresh one per --max-time round)
used to difference it again: in a GradBench run most of the harness's own seconds were the same kmeans, llsq and
lse gradients differenced for every adapter and variant (2 s each at kmeans k = 100). The runner names a directory
of its per-run cache for workers of the environment it runs in (ADCOMPARE_REFERENCE_CACHE, worker_handle.py); a
reference that took long enough to be worth a file is pickled there, and the next worker that needs it reads it.
Workers of other `--env` environments are not given the directory: their adcompare or problems may differ. The
file's name digests the key and the differencing code's own source, so a changed reference is never read back.

A file is the reference's pickle with its arrays' bytes out of band, after it, each at a 64-byte boundary; a reader
maps the file and its arrays are read-only views of the mapping (pickle protocol 5's out-of-band buffers): nothing
is copied or allocated until the check reads them, from the page cache the workers share (BA's value reference at
p = 28,987,644 is 700 MB, a private copy in each reading worker when unpickled whole).
"""
from __future__ import annotations

import functools
import hashlib
import mmap
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

ENV = "ADCOMPARE_REFERENCE_CACHE"
SHARE_ABOVE = 0.05  # seconds: a cheaper reference is differenced again (reading a file costs about a millisecond)
READ_RATE = 500 * 2**20  # bytes a second: a reference is shared when reading it back at this rate beats computing it
LARGEST = 2**30  # bytes of arrays one shared file may hold
RUN_TOTAL = 4 * 2**30  # bytes all of a run's shared files may hold: its directory lives until the run ends


def worth_sharing(seconds: float, arrays_bytes: int) -> bool:
    """Whether a reference that took `seconds` and holds `arrays_bytes` is worth a file: BA's largest value
    reference is 219 MB that NumPy takes 7-11 s to compute in each of eight workers, and reads back in well under
    a second; a 64 MB gradient differenced in 0.05 s is not worth the round trip."""
    return seconds >= SHARE_ABOVE and arrays_bytes <= min(LARGEST, READ_RATE * seconds)


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    here = Path(__file__).parent
    h = hashlib.blake2b(digest_size=16)
    for name in ("reference.py", "differencing.py", "tolerance.py"):
        h.update((here / name).read_bytes())
    return h.hexdigest()


def _path(key: tuple) -> Path | None:
    directory = os.environ.get(ENV)
    if not directory:
        return None
    name = hashlib.blake2b(repr((key, _code_digest())).encode(), digest_size=20).hexdigest()
    return Path(directory) / f"{name}.pickle"


ALIGN = 64  # bytes: where each array's bytes start in a file (NumPy's own alignment for SIMD loads)


def _padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _dump(reference: Any, f: Any) -> None:
    """[8-byte length of the layout][layout: the pickle's length and each buffer's][pickle][buffers], each of the
    last two starting at an ALIGN boundary."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(reference, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    layout = pickle.dumps((len(data), [r.nbytes for r in raws]), protocol=5)
    f.write(len(layout).to_bytes(8, "little") + layout)
    at = 8 + len(layout)
    for chunk in (data, *raws):
        f.write(b"\0" * (_padded(at) - at))
        f.write(chunk)
        at = _padded(at) + len(chunk)


def _mapped(path: Path) -> Any:
    with path.open("rb") as f:
        view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))  # kept alive by the arrays on it
    size = int.from_bytes(view[:8], "little")
    length, sizes = pickle.loads(view[8:8 + size])
    spans, at = [], 8 + size
    for n in (length, *sizes):
        start = _padded(at)
        if start + n > len(view):
            raise EOFError("the file ends before its arrays")
        spans.append(view[start:start + n])
        at = start + n
    return pickle.loads(spans[0], buffers=spans[1:])


def load(key: tuple) -> Any | None:
    """The reference another worker of this run kept under `key` (its arrays read-only views of the file, mapped),
    or None."""
    path = _path(key)
    if path is None or not path.is_file():
        return None
    try:
        return _mapped(path)
    except (OSError, ValueError, IndexError, KeyError, TypeError, pickle.UnpicklingError, EOFError, AttributeError):
        return None  # a half-written or stale file: difference it again


def keep(key: tuple, reference: Any, arrays_bytes: int) -> None:
    """Keep `reference` for the run's other workers when it was dear enough and small enough to share."""
    path = _path(key)
    if path is None or not worth_sharing(reference.seconds, arrays_bytes):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        held = sum(f.stat().st_size for f in path.parent.glob("*.pickle"))
        if held + arrays_bytes > RUN_TOTAL or shutil.disk_usage(path.parent).free < 4 * arrays_bytes:
            return  # the run's files or the disk (or tmpfs: memory) are full enough: the next worker recomputes
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            _dump(reference, f)
        os.replace(tmp, path)  # whole or absent: a worker reading it never sees half a file; never written again
    except OSError:
        pass  # a full or read-only disk costs the other workers a recomputation, nothing else
