"""OpenDP, imported once with its "contrib" features enabled (private module).

Every draw of privacy noise in trustlab goes through OpenDP's samplers
(:mod:`trustlab.privacy.samplers`); privacy maps (e.g. the certified epsilon of
randomized response) come from the same library.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["opendp"]


@lru_cache(maxsize=1)
def opendp() -> Any:
    """Return ``opendp.prelude`` with the "contrib" features enabled (imported on first use)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp
