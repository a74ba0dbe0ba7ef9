"""ADBench's hand-tracking files, as GradBench ships them (evals/ht/data/{simple,complicated}_{small,big}/), read
into the arrays `ht` takes; GradBench's own reader is python/gradbench/gradbench/evals/ht/io.py (from ADBench's
src/python/shared/input_utils.py), which this follows.

A hand file `hand<i>_t26_c<c>.txt` holds a line `c 26`, then c lines `correspondence x y z`, then (complicated
variant only) c lines `u0 u1`, then 26 lines of θ; its model is the sibling folder `model/` (bones.txt: name,
parent, a 4 × 4 base-relative and a 4 × 4 inverse base-absolute transform a line, ':'-separated; vertices.txt: x, y,
z, five unused numbers, then a count and that many (bone, weight) pairs; triangles.txt: three vertex indices).
ADBench's and GradBench's folders are laid out alike. A file `NAME` may be shipped compressed as `NAME.xz` (this
package's copies are: the big model's 1.6 MB vertices.txt repeats the small model's 544 lines to 10,000, so it is
32 kB as xz).

GradBench's JSON, the `input` its ht eval sends a tool (evals/ht/README.md's HTInput: io.read_hand_instance's
HandInput as `to_dict()` encodes it), is read too (`read_json`): θ, us ([] for the simple variant, else c rows of
two) and data (the model, as load_model builds it, base positions homogeneous; correspondences; points).
"""
from __future__ import annotations

import functools
import lzma
import re
from pathlib import Path
from typing import IO

import numpy as np

from .json_inputs import read_json_object

DATA = Path(__file__).with_name("data") / "ht"
THETA = 26  # GradBench's pose: global rotation (3), translation (3), 5 fingers × 4 angles
# GradBench's hand files per variant and model (evals/ht/data/*/hand<i>_t26_c<c>.txt): index → number of points
HAND_POINTS = {1: 100, 2: 192, 3: 200, 4: 400, 5: 800, 6: 1600, 7: 3200, 8: 6400, 9: 12800, 10: 25600, 11: 51200,
               12: 100000}
SHIPPED_HANDS = (1, 2, 3, 4, 5, 6)  # c ≤ 1,600 ship with adcompare; the rest are read with --inputs
MODEL_VERTICES = {"small": 544, "big": 10000}  # vertices.txt's lines in GradBench's two models
CORNERS = {"simple": 1, "complicated": 3}  # the vertices a point is matched to: a vertex, or a triangle's corners


def _open(path: Path) -> IO[str]:
    """`path` as text, or its `.xz` twin when only that exists."""
    if not path.exists() and path.with_name(path.name + ".xz").exists():
        return lzma.open(path.with_name(path.name + ".xz"), "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _exists(path: Path) -> bool:
    return path.exists() or path.with_name(path.name + ".xz").exists()


def shipped_hand(variant: str, model: str, hand: int) -> Path:
    """The path of GradBench's `hand<hand>` file of `variant` and `model` in this package (maybe as .xz)."""
    return DATA / f"{variant}_{model}" / f"hand{hand}_t{THETA}_c{HAND_POINTS[hand]}.txt"


def model_folder(model: str) -> Path:
    """This package's copy of GradBench's `model` folder (identical in the simple and complicated folders)."""
    return DATA / f"model_{model}"


@functools.lru_cache(maxsize=4)  # the big model takes 0.3 s to parse; its arrays are read-only
def read_model(folder: Path) -> dict[str, np.ndarray]:
    """The hand model in `folder`: bones' parents (root −1), base relatives and inverse base absolutes (bones × 4
    × 4, row-major as io.py reshapes them), homogeneous base positions (vertices × 4), skinning weights (vertices ×
    bones) and triangles (× 3), as GradBench's load_model builds them."""
    for name in ("bones.txt", "vertices.txt", "triangles.txt"):
        if not _exists(folder / name):
            raise ValueError(f"{folder / name}: missing; a hand file's model is its sibling folder model/ with "
                             f"bones.txt, vertices.txt and triangles.txt, as in GradBench's evals/ht/data")
    with _open(folder / "bones.txt") as f:
        bones = [line.rstrip("\n").split(":") for line in f if line.strip()]
    parents = np.array([int(b[1]) for b in bones])
    transforms = np.array([[float(v) for v in b[2:34]] for b in bones]).reshape(len(bones), 2, 4, 4)
    with _open(folder / "vertices.txt") as f:
        rows = [line.split(":") for line in f if line.strip()]
    positions = np.ones((len(rows), 4))
    weights = np.zeros((len(rows), len(bones)))
    for i, atoms in enumerate(rows):
        positions[i, :3] = [float(v) for v in atoms[:3]]
        for j in range(int(atoms[8])):
            weights[i, int(atoms[9 + 2 * j])] = float(atoms[10 + 2 * j])
    with _open(folder / "triangles.txt") as f:
        triangles = np.array([[int(v) for v in line.split(":")] for line in f if line.strip()])
    model = {"parents": parents, "base_relatives": transforms[:, 0], "inverse_base_absolutes": transforms[:, 1],
             "base_positions": positions, "weights": weights, "triangles": triangles}
    for array in model.values():
        array.flags.writeable = False  # cached for every caller: a write would change every later cell's model
    return model


def read_hand(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """(correspondences (c,), points (c, 3), us (c, 2) or None for the simple variant, θ (26,)) from a hand file;
    the variant is told by the line count (c lines of us or none), as GradBench tells it by an empty `us`."""
    with _open(path) as f:
        lines = [line.split() for line in f if line.strip()]
    c, theta_count = _first_line(lines[0] if lines else [], path)
    complicated = _complicated(len(lines), c, theta_count, path)
    body = lines[1:1 + c]
    if any(len(line) != 4 for line in body):
        raise ValueError(f"{path}: not ADBench's hand file (after `c 26`, c lines `correspondence x y z`)")
    correspondences = np.array([int(line[0]) for line in body])
    points = np.array([[float(v) for v in line[1:]] for line in body])
    us = np.array([[float(v) for v in line] for line in lines[1 + c:1 + 2 * c]]) if complicated else None
    theta = np.array([float(line[0]) for line in lines[len(lines) - theta_count:]])
    return correspondences, points, us, theta


def _first_line(first: list[str], path: Path) -> tuple[int, int]:
    if len(first) != 2 or not all(v.isdigit() for v in first) or int(first[1]) != THETA:
        raise ValueError(f"{path}: not ADBench's hand file (first line `c {THETA}`: points and pose parameters)")
    return int(first[0]), int(first[1])


def _complicated(line_count: int, c: int, theta_count: int, path: Path) -> bool:
    if line_count == 1 + c + theta_count:
        return False
    if line_count == 1 + 2 * c + theta_count:
        return True
    raise ValueError(f"{path}: {line_count} lines, expected {1 + c + theta_count} (simple) or "
                     f"{1 + 2 * c + theta_count} (complicated) for c = {c}; the file is cut or not a hand file")


def hand_index(path: Path, c: int) -> int:
    """GradBench's index of a hand file: from its name `hand<i>_…`, else from its point count."""
    found = re.match(r"hand(\d+)_", path.name)
    if found:
        return int(found.group(1))
    for index, points in HAND_POINTS.items():
        if points == c:
            return index
    raise ValueError(f"{path}: cannot tell its GradBench hand index from its {c} points; name it "
                     f"hand<i>_t{THETA}_c{c}{path.suffix} as ADBench does")


def read_header(path: Path) -> dict[str, int]:
    """hand, c, corners and v without building arrays: the first line, the line count (which tells the variant)
    and the sibling model's vertex count."""
    with _open(path) as f:
        first = f.readline().split()
        c, theta_count = _first_line(first, path)
        second = f.readline().split()
        if len(second) != 4:
            raise ValueError(f"{path}: not ADBench's hand file (after `c 26`, lines `correspondence x y z`)")
        count = 2 + sum(1 for line in f if line.strip())
    corners = CORNERS["complicated" if _complicated(count, c, theta_count, path) else "simple"]
    model = path.parent / "model"
    if not _exists(model / "vertices.txt"):
        raise ValueError(f"{path}: its model folder {model} has no vertices.txt; keep the hand file beside GradBench's "
                         f"model/ folder (evals/ht/data/<variant>_<model>/)")
    with _open(model / "vertices.txt") as f:
        vertices = sum(1 for line in f if line.strip())
    return {"hand": hand_index(path, c), "c": c, "corners": corners, "v": vertices}


MODEL_KEYS = ("parents", "base_relatives", "inverse_base_absolutes", "base_positions", "weights", "triangles")


def _has_model(data: dict) -> bool:
    """HTInput's data: an object with correspondences, points and the model, an object with MODEL_KEYS."""
    hand = data.get("data")
    return (isinstance(hand, dict) and {"correspondences", "points"} <= set(hand)
            and isinstance(hand.get("model"), dict) and set(MODEL_KEYS) <= set(hand["model"]))


def read_json(path: Path) -> tuple[dict[str, int], dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray | None,
                                   np.ndarray]:
    """(hand, c, corners, v; the model as read_model gives it; correspondences, points, us or None, θ) from
    GradBench's ht input as JSON. Planning reads it whole too: JSON has no header (no arrays are built then)."""
    data = read_json_object(path, f"GradBench's ht input (a JSON object with theta, us and data: model with "
                                  f"{', '.join(MODEL_KEYS)}; correspondences; points)", ("theta", "us"), _has_model)
    hand, model = data["data"], data["data"]["model"]
    if model.get("is_mirrored"):
        raise ValueError(f"{path}: a mirrored hand model; GradBench's reader never mirrors one and ht does not "
                         f"mirror: give is_mirrored false")
    arrays = {key: np.asarray(model[key], dtype=np.int64 if key in ("parents", "triangles") else np.float64)
              for key in MODEL_KEYS}
    points, theta = np.asarray(hand["points"], dtype=np.float64), np.asarray(data["theta"], dtype=np.float64)
    c, v = len(points), len(arrays["base_positions"])
    us = np.asarray(data["us"], dtype=np.float64).reshape(-1, 2) if len(data["us"]) else None
    if (points.shape != (c, 3) or theta.shape != (THETA,) or arrays["base_positions"].shape != (v, 4)
            or us is not None and us.shape != (c, 2)):
        raise ValueError(f"{path}: GradBench's ht input needs points (c rows of 3), θ ({THETA}), base_positions (v "
                         f"rows of 4, homogeneous) and us ([] or c rows of 2); found {points.shape}, {theta.shape}, "
                         f"{arrays['base_positions'].shape} and {None if us is None else us.shape}")
    dims = {"hand": hand_index(path, c), "c": c, "corners": CORNERS["simple" if us is None else "complicated"], "v": v}
    return dims, arrays, np.asarray(hand["correspondences"], dtype=np.int64), points, us, theta
