"""What the efficiency estimators share once fitted: prediction by the trained torch model."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.errors import NotFittedError
from trustlab.vision.classifiers import predict


class TrainedModelMixin:
    """``predict`` by ``self.model_``, the torch model a ``fit`` trained (quantized or pruned)."""

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels of the trained model.

        Parameters
        ----------
        X : array-like of shape (n, ...)
            Images in [0, 1].

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        if not hasattr(self, "model_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit(X, y) first.")
        return predict(self.model_, X)
