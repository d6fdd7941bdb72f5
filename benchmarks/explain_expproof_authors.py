"""trustlab's ExpProof surrogate beside the authors' own, on their published example.

Reads the authors' ``example-proof/witness.json`` (repository ``emlaufer/ExpProof``; not
vendored here) from the path in the environment variable ``EXPPROOF_WITNESS``; without
it nothing is measured. From the witness: the 10 perturbed points (scale ``2^7``), the
model's labels, the kernel centre, their fixed intercept and coefficients (scale
``2^16``). Then:

1. the authors' variant (:func:`trustlab.explain.verifiable.expproof_lasso`: their
   kernel, their input scaling, penalty 0.010009765625, intercept fixed) against their
   coefficients: the largest difference and the supports;
2. the same data with the intercept fitted jointly (trustlab's choice): the coefficients'
   difference, the supports and both objectives;
3. the perturbations' mean over coordinates in units of ``std`` (their Gaussian sampler
   is shifted by -0.5; their scale-``2^8`` perturbation is added to the scale-``2^7``
   query as an integer, so in the model's units it is twice as large).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

_P = 0x30644E72E131A029B85045B68181585D2833E84879B9709143E1F593F0000001  # BN254 scalar field


def _felt(h: str) -> int:
    v = int.from_bytes(bytes.fromhex(h[2:] if h.startswith("0x") else h), "little")
    return v - _P if v > _P // 2 else v


def load_witness(path: str) -> dict[str, Any]:
    """The pieces of the authors' witness that the surrogate uses, decoded to integers."""
    with open(path) as f:
        w = json.load(f)
    lw = w["lime_witness"]
    rows = np.array([_felt(h) for h in lw["model_input"]["inner"]]).reshape(lw["model_input"]["dims"])
    labels = np.array([float(v) for v in w["pretty_elements"]["rescaled_outputs"][0]])
    return {
        "x": rows[0],
        "X": rows[1:],  # the 10 perturbed points (row 0 is the query)
        "y": labels[1:],
        "centre": np.array([_felt(h) for h in lw["surrogate"]]),
        "coef": np.array([_felt(h) for h in lw["coefficients"]]) / 2.0**16,
        "intercept": _felt(lw["intercept"]) / 2.0**16,
        "std": _felt(lw["std"]) / 2.0**8,
    }


def compare(wit: dict[str, Any]) -> dict[str, Any]:
    """Reproduce the authors' coefficients and set trustlab's joint intercept beside them."""
    from sklearn.linear_model import Lasso

    from trustlab.explain.verifiable import EXPPROOF_ALPHA, expproof_lasso, expproof_sqrt_weights

    X, y, c, b = wit["X"], wit["y"], wit["centre"], wit["intercept"]
    ours = expproof_lasso(X, y, c, b)
    sw = expproof_sqrt_weights(X, c)
    Xw, yw = X * sw[:, None] / 2.0**16, y * sw / 2.0**8
    joint = Lasso(alpha=EXPPROOF_ALPHA, tol=1e-15, max_iter=10**7).fit(Xw, yw)

    def objective(beta: np.ndarray, b0: float) -> float:
        r = yw - b0 - Xw @ beta
        return float(r @ r / (2 * len(yw)) + EXPPROOF_ALPHA * np.abs(beta).sum())

    # the sampler's output is at scale 2^8 and is added to the scale-2^7 query as an integer
    pert = (X - wit["x"]) / 256.0 / wit["std"]
    return {
        "max_diff_fixed_intercept": float(np.abs(ours - wit["coef"]).max()),
        "support_authors": np.flatnonzero(wit["coef"]).tolist(),
        "support_fixed_intercept": np.flatnonzero(np.abs(ours) > 2**-17).tolist(),
        "max_diff_joint_intercept": float(np.abs(joint.coef_ - wit["coef"]).max()),
        "support_joint_intercept": np.flatnonzero(joint.coef_).tolist(),
        "intercept_authors": b,
        "intercept_joint": float(joint.intercept_),
        "objective_authors": objective(wit["coef"], b),
        "objective_joint": objective(joint.coef_, float(joint.intercept_)),
        "perturbation_mean_in_std": float(pert.mean()),
        "perturbation_mean_se": float(pert.std(ddof=1) / np.sqrt(pert.size)),
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Compare on the witness at ``$EXPPROOF_WITNESS`` (skipped without it)."""
    path = os.environ.get("EXPPROOF_WITNESS")
    if not path or not os.path.exists(path):
        return {
            "title": "ExpProof: trustlab vs the authors' surrogate",
            "rows": [],
            "notes": ["set EXPPROOF_WITNESS to the authors' example-proof/witness.json to run this"],
        }
    res = compare(load_witness(path))
    rows = [{"quantity": k, "value": str(v)} for k, v in res.items()]
    return {
        "title": "ExpProof: trustlab vs the authors' surrogate (their witness.json)",
        "rows": rows,
        "result": res,
        "notes": [],
    }
