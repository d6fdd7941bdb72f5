"""SAeUron's per-concept ``(percentile, multiplier)`` sweep, the authors' object-unlearning protocol.

Private to :mod:`trustlab.unlearning.saeuron` (:meth:`SAeUron.tune` documents it). For every
concept and grid point the fitted SAeUron generates with the concept removed, a judge labels
the images, and the point with the largest ``(UA + IRA) / 2`` is kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from trustlab.errors import DataError, ParameterError
from trustlab.unlearning import _saeuron_hooks as hk


def sweep(
    su: Any, X: Any, y: Any, judge: Any, percentiles: Any, multipliers: Any, concepts: Any
) -> pd.DataFrame:
    """Run :meth:`SAeUron.tune` on the fitted ``su``: fill ``su.concept_params_``, return the grid."""
    check_is_fitted(su, "concept_means_")
    if not callable(judge):
        raise ParameterError("judge must be a callable images -> labels (a classifier).", argument="judge")
    x = hk.check_noise(X)
    ref = np.asarray(y)
    if ref.shape != (x.shape[0],):
        raise DataError(f"y must hold {x.shape[0]} reference labels; got shape {ref.shape}.", argument="y")
    grid = [(float(p), float(m)) for p in percentiles for m in multipliers]
    if not grid:
        raise ParameterError("percentiles and multipliers must not be empty.", argument="percentiles")
    rows = []
    for concept in su._concepts(list(su.classes_) if concepts is None else concepts):
        on = ref == concept
        if not on.any() or on.all():
            raise DataError(f"y must hold rows of concept {concept!r} and of others.", argument="y")
        best, best_score = grid[0], -np.inf
        for pct, gamma in grid:
            pred = np.asarray(judge(su.generate(x, ref, unlearn=[concept], percentile=pct, multiplier=gamma)))
            ua = float(np.mean(pred[on] != concept))
            ira = float(np.mean(pred[~on] == ref[~on]))
            rows.append({"concept": concept, "percentile": pct, "multiplier": gamma, "UA": ua, "IRA": ira})
            if (ua + ira) / 2 > best_score:
                best, best_score = (pct, gamma), (ua + ira) / 2
        su.concept_params_[concept] = best
    out = pd.DataFrame(rows)
    out["score"] = (out["UA"] + out["IRA"]) / 2
    out["chosen"] = [
        su.concept_params_[c] == (p, m)
        for c, p, m in zip(out.concept, out.percentile, out.multiplier, strict=True)
    ]
    return out
