"""GradBench's `ht` eval: ADBench's hand tracking (Srajer, Kukelova & Fitzgibbon 2018), the residuals of a skinned
hand model against measured points and their dense Jacobian (evals/ht/README.md, commit f26651a7)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from adcompare import Shapes, problem

from . import ht_files
from .json_inputs import is_json

HT_SIZES = [dict(hand=hand, c=ht_files.HAND_POINTS[hand], corners=corners, v=vertices)
            for corners in ht_files.CORNERS.values() for vertices in ht_files.MODEL_VERTICES.values()
            for hand in ht_files.SHIPPED_HANDS]
SMALL_ANGLE = 1e-4  # GradBench's angle_axis_to_rotation_matrix: the identity below this rotation angle


def _matrices(entries, xp):
    """(…, 3, 3) from nine (…) arrays in row-major order."""
    return xp.reshape(xp.stack(entries, axis=-1), (*entries[0].shape, 3, 3))


def _euler_rotations(tx, tz, xp):
    """GradBench's euler_angles_to_rotation_matrix per bone, Rz(tz) · Ry(ty) · Rx(tx), with ty = 0: no bone's pose
    sets it (to_pose_params fills two of its three angles), so Ry is the identity, and a product with the identity
    is exact in floating point."""
    one, zero = xp.ones_like(tx), xp.zeros_like(tx)
    cx, sx, cz, sz = xp.cos(tx), xp.sin(tx), xp.cos(tz), xp.sin(tz)
    rx = _matrices([one, zero, zero, zero, cx, -sx, zero, sx, cx], xp)
    rz = _matrices([cz, -sz, zero, sz, cz, zero, zero, zero, one], xp)
    return xp.matmul(rz, rx)


def _angle_axis(r, xp):
    """GradBench's angle_axis_to_rotation_matrix (Rodrigues), the identity for a rotation angle below 1e-4: a
    `where` with a safe angle in the discarded branch, so it compiles and its derivative has no NaN."""
    angle_sq = xp.sum(r * r)
    small = angle_sq < SMALL_ANGLE ** 2
    angle = xp.sqrt(xp.where(small, xp.ones_like(angle_sq), angle_sq))
    x, y, z = r[0] / angle, r[1] / angle, r[2] / angle
    s, c = xp.sin(angle), xp.cos(angle)
    rotation = _matrices([x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s,
                          x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s,
                          x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c], xp)
    one, zero = xp.ones_like(angle), xp.zeros_like(angle)
    identity = _matrices([one, zero, zero, zero, one, zero, zero, zero, one], xp)
    return xp.where(small, identity, rotation)


def _bone_angles(theta, bones, xp):
    """(tx, tz) per bone from θ, GradBench's to_pose_params: bone 0 (wrist) unposed; each finger f = 0…4 owns bones
    1+4f … 4+4f, of which the first is unposed, the second takes θ[6+4f] (x) and θ[7+4f] (z), the third θ[8+4f]
    and the fourth θ[9+4f] (x); bones after the fingers (forearm) unposed."""
    fingers = xp.reshape(theta[6:26], (5, 4))
    flex1, spread, flex2, flex3 = fingers[:, 0], fingers[:, 1], fingers[:, 2], fingers[:, 3]
    zero = xp.zeros_like(flex1)
    rest = xp.zeros_like(theta[:bones - 20])  # the wrist and the bones after the fingers
    tx = xp.reshape(xp.stack([zero, flex1, flex2, flex3], axis=1), (20,))
    tz = xp.reshape(xp.stack([zero, spread, zero, zero], axis=1), (20,))
    return xp.concat([rest[:1], tx, rest[1:]]), xp.concat([rest[:1], tz, rest[1:]])


# What the size error says (`--size hand7-…`): the declared sizes are the shipped files
MORE_SIZES = (f"hand{max(ht_files.SHIPPED_HANDS) + 1}–hand{max(ht_files.HAND_POINTS)} do not ship with adcompare: "
              f"run one with --inputs FILE, GradBench's evals/ht/data/<variant>_<model>/hand<i>_t26_c<c>.txt (the "
              f"file's sibling model/ folder is read) or the JSON input GradBench's ht eval sends a tool; no --size")


@problem(sizes=HT_SIZES, wrt="params", tags=("classic", "tall"), operators=("value", "jacfwd", "jacrev"),
         more_sizes=MORE_SIZES)
def ht(params, /, *, points, corners, weights, base_positions, base_relatives, inverse_base_absolutes, parents,
       depth_masks, xp):
    """GradBench's hand tracking (python/gradbench/gradbench/tools/pytorch/ht_objective.py; its golden,
    cpp/gradbench/evals/ht.hpp): R^26 → R^(3c) (simple) or R^(2c+26) → R^(3c) (complicated), the residuals
    points − hand points, one row of 3 per measured point, and GradBench's `jacobian` as the dense Jacobian.

    θ (26) poses a hand of 22 bones: global rotation (angle-axis, 3), translation (3), and 4 angles per finger.
    Each bone's relative transform is its base relative times an Euler rotation; absolutes compose them down the
    bone tree (a level at a time: bones at depth k take their parent's absolute times their own relative, the
    product GradBench forms); a vertex is the weighted sum of the bone transforms (absolute × inverse base
    absolute) applied to its base position (linear blend skinning, every vertex of the model: 544 in the small
    model, 10,000 in the big, whose vertices are the small model's repeated, as in ADBench's data); the global
    rotation and translation then move the vertices each point needs.
    Simple: point i matches vertex corrᵢ. Complicated: point i lies in triangle corrᵢ at barycentric (u₀, u₁),
    hand point u₀·v₀ + u₁·v₁ + (1 − u₀ − u₁)·v₂, and the us are differentiated too.

    Layout: params is [us (c × 2, row by row) | θ], GradBench's (its pytorch tool's, from ADBench's PyTorch module);
    the residuals are point by point, x, y, z. GradBench's `jacobian` for complicated is not this dense (3c) × (2c +
    26) matrix but a (3c) × 28 one: the 3 × 2 block of each point's own us (the rest of its us columns are zero)
    beside the 26 θ columns; tests/test_ht.py compares by taking those entries of the dense one. ADBench's hand files
    list the us before θ too, but each point's us on a line of its own after all the points (read by
    problems/ht_files.py). GradBench's model is never mirrored (its reader sets is_mirrored false), so neither is
    this one. Sums in a different order from GradBench's: skinning blends the bones' 3 × 4 transforms per vertex,
    then applies the blend (GradBench applies each bone, then blends the positions: 7× the intermediate size, the
    same numbers to rounding), and the global transform is applied to the vertices the points use (the same
    arithmetic per vertex).

    Sizes: hand (GradBench's file index), c (points), corners (1 simple, 3 complicated: the vertices a point is
    matched to) and v (the model's vertices). Inputs are GradBench's files (evals/ht/data): hand1–hand6 (c ≤ 1,600)
    of every variant and model ship with adcompare (problems/data/ht, MIT, Microsoft's ADBench data); hand7–hand12
    (c = 3,200 … 100,000) are read with `--inputs path/to/<variant>_<model>/hand7_t26_c3200.txt`, whose sibling
    model/ folder is read, or with `--inputs FILE.json`, the input GradBench's eval sends a tool (its HTInput: θ,
    us, data with the model). No seed: the inputs are the files'.
    """
    c = points.shape[0]
    complicated = corners.shape[0] == 3 * c
    theta = params[2 * c:] if complicated else params
    bones = base_relatives.shape[0]
    tx, tz = _bone_angles(theta, bones, xp)
    rotations = _euler_rotations(tx, tz, xp)  # (bones, 3, 3)
    # base relative × [[R, 0], [0, 1]]: the first three columns times R, the fourth unchanged
    relatives = xp.concat([xp.matmul(base_relatives[:, :, :3], rotations), base_relatives[:, :, 3:]], axis=2)
    absolutes = relatives
    for level in range(depth_masks.shape[0]):
        at_level = xp.reshape(depth_masks[level], (bones, 1, 1)) > 0
        absolutes = xp.where(at_level, xp.matmul(xp.take(absolutes, parents, axis=0), relatives), absolutes)
    transforms = xp.matmul(absolutes, inverse_base_absolutes)[:, :3, :]  # (bones, 3, 4): the homogeneous row unused
    blended = xp.reshape(xp.matmul(weights, xp.reshape(transforms, (bones, 12))), (weights.shape[0], 3, 4))
    vertices = xp.sum(blended * xp.expand_dims(base_positions, axis=1), axis=2)  # (v, 3)
    used = xp.take(vertices, corners, axis=0)  # (c, 3) or (3c, 3)
    rotated = xp.matmul(used, xp.permute_dims(_angle_axis(theta[0:3], xp), (1, 0))) + theta[3:6]
    if complicated:
        us = xp.reshape(params[:2 * c], (c, 2))
        u0, u1 = us[:, 0:1], us[:, 1:2]
        triangle = xp.reshape(rotated, (c, 3, 3))
        rotated = u0 * triangle[:, 0] + u1 * triangle[:, 1] + (1.0 - u0 - u1) * triangle[:, 2]
    return xp.reshape(points - rotated, (3 * c,))


def _arrays(model: dict[str, np.ndarray], correspondences, points, us, theta) -> dict[str, np.ndarray]:
    """The problem's inputs from a model and a hand file's arrays: GradBench's −1 root parent becomes the root's own
    index (its level mask never selects it), and each bone's depth in the tree a mask row."""
    parents = model["parents"]
    depth = np.zeros(len(parents), dtype=int)
    for i, parent in enumerate(parents):  # parents precede children (GradBench's model assumes it too)
        if parent >= i:
            raise ValueError(f"bone {i}'s parent {parent} does not precede it; GradBench's models order bones so")
        depth[i] = 0 if parent < 0 else depth[parent] + 1
    depth_masks = np.array([depth == level for level in range(1, depth.max() + 1)], dtype=np.float64)
    corners = correspondences if us is None else model["triangles"][correspondences].reshape(-1)
    params = theta if us is None else np.concatenate([us.reshape(-1), theta])
    return {"params": params, "points": points, "corners": corners.astype(np.int64),
            "weights": model["weights"], "base_positions": model["base_positions"],
            "base_relatives": model["base_relatives"], "inverse_base_absolutes": model["inverse_base_absolutes"],
            "parents": np.where(parents < 0, np.arange(len(parents)), parents).astype(np.int64),
            "depth_masks": depth_masks.reshape(-1, len(parents))}


@ht.inputs
def _(rng, hand, c, corners, v):
    # GradBench's data, not drawn: the seed changes nothing
    variant = next(name for name, count in ht_files.CORNERS.items() if count == corners)
    model = next(name for name, count in ht_files.MODEL_VERTICES.items() if count == v)
    path = ht_files.shipped_hand(variant, model, hand)
    return _arrays(ht_files.read_model(ht_files.model_folder(model)), *ht_files.read_hand(path))


@ht.reads
def read_hand_file(path):
    """GradBench's (ADBench's) hand file with its sibling model/ folder, or GradBench's ht input as JSON."""
    if is_json(path):
        dims, model, *hand = ht_files.read_json(Path(path))
        return dims, _arrays(model, *hand)
    dims = ht_files.read_header(Path(path))
    arrays = _arrays(ht_files.read_model(Path(path).parent / "model"), *ht_files.read_hand(Path(path)))
    return dims, arrays


@ht.reads_header
def read_hand_header(path):
    """hand, c, corners, v from the hand file's first line and line count and its model's vertex count; from
    GradBench's JSON, its lengths (parsed whole: JSON has no header)."""
    if is_json(path):
        return ht_files.read_json(Path(path))[0]
    return ht_files.read_header(Path(path))


@ht.shapes
def _(hand, c, corners, v):
    wrt = 26 + (2 * c if corners == 3 else 0)
    # skinning: a (v × 22) · (22 × 12) product and 12 multiply-adds a vertex; ~60 array operations
    return Shapes(wrt=(wrt,), output=(3 * c,), flops=2 * v * 22 * 12 + 12 * v + 30 * c * corners, operations=60)
