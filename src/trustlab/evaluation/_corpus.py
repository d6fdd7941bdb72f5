"""Reading a text corpus incrementally: documents or file paths in, bounded pieces of text out.

A corpus is a ``str`` (one document), a path, or an iterable mixing documents (``str``) and paths
(:class:`os.PathLike`, e.g. :class:`pathlib.Path`). A path names a UTF-8 text file (one document,
read a block at a time), a JSON-lines file (``.jsonl``, ``.ndjson``: one document per line, a JSON
string or an object with a ``"text"`` entry, as The Pile, Dolma and HELM's overlap scripts store
corpora), either optionally gzip-compressed (``.gz``), or a folder (its files, recursively, in
sorted order, hidden ones skipped). Only the file names given are read; nothing is written.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from trustlab.errors import DataError, DataTypeError

BLOCK_CHARS = 1_000_000  # longest piece handed on: a longer document is cut at white space
_JSON_LINES = (".jsonl", ".ndjson")


def _open(path: Path, name: str) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="strict", newline="")
    return open(path, encoding="utf-8-sig", errors="strict", newline="")


def _cut(text: str, block: int, start: int = 0) -> int:
    """Index just after the last white space in ``text[start : start + block]`` (the end if short).

    Cutting after white space keeps every token whole and lower-casing context-free (Greek final
    sigma looks past case-ignorable characters, never past white space), so the pieces tokenise
    as the whole would. Falls back to the first white space after the block, else the end.
    """
    if block <= 0 or len(text) - start <= block:
        return len(text)
    for i in range(start + block - 1, start - 1, -1):
        if text[i].isspace():
            return i + 1
    for i in range(start + block, len(text)):
        if text[i].isspace():
            return i + 1
    return len(text)


def _split(doc: str, block: int) -> Iterator[tuple[str, bool]]:
    """``(piece, starts_a_document)`` for one document, cut into pieces of about ``block`` chars."""
    start = 0
    while True:
        at = _cut(doc, block, start)
        yield doc[start:at], start == 0
        if at >= len(doc):
            return
        start = at


def _text_file(path: Path, name: str, block: int) -> Iterator[tuple[str, bool]]:
    first, rest = True, ""
    with _open(path, name) as f:
        while True:
            new = f.read(block if block > 0 else -1)
            if "\x00" in new:
                raise DataError(
                    f"{name} names {path}, which holds NUL bytes (not text); pass UTF-8 text or "
                    "JSON-lines files.",
                    argument=name,
                )
            text = rest + new
            if not new:
                if text or first:
                    yield text, first
                return
            if block <= 0:
                at = len(text)
            else:
                at = _cut(text, block) if len(text) > block else _last_space(text)
            if at == 0:
                rest = text
                continue
            yield text[:at], first
            first, rest = False, text[at:]


def _last_space(text: str) -> int:
    for i in range(len(text) - 1, max(-1, len(text) - 4097), -1):
        if text[i].isspace():
            return i + 1
    return 0


def _json_lines(path: Path, name: str, block: int) -> Iterator[tuple[str, bool]]:
    with _open(path, name) as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise DataError(
                    f"{name} names {path}, whose line {number} is not JSON ({exc}); write one JSON object "
                    'with a "text" entry (or one JSON string) per line.',
                    argument=name,
                ) from exc
            doc = row.get("text") if isinstance(row, dict) else row
            if not isinstance(doc, str):
                raise DataError(
                    f'{name} names {path}, whose line {number} has no "text" string; write one JSON object '
                    'with a "text" entry (or one JSON string) per line.',
                    argument=name,
                )
            yield from _split(doc, block)


def _files(path: Path, name: str) -> list[Path]:
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
    if not path.is_file():
        raise DataError(f"{name} names {path}, which does not exist; check the path.", argument=name)
    return [path]


def _from_path(path: Path, name: str, block: int) -> Iterator[tuple[str, bool]]:
    for file in _files(path, name):
        stem = file.name[: -len(".gz")] if file.name.endswith(".gz") else file.name
        reader = _json_lines if stem.endswith(_JSON_LINES) else _text_file
        try:
            yield from reader(file, name, block)
        except UnicodeDecodeError as exc:
            raise DataError(
                f"{name} names {file}, which is not UTF-8 text ({exc.reason} at byte {exc.start}); pass text "
                "or JSON-lines files.",
                argument=name,
            ) from exc
        except (OSError, EOFError) as exc:
            raise DataError(f"{name} names {file}, which cannot be read ({exc}).", argument=name) from exc


def pieces(value: Any, name: str, block: int | None = None) -> Iterator[tuple[str, bool]]:
    """The corpus as ``(text, starts_a_document)`` pieces of at most about ``block`` characters.

    Consecutive pieces of one document are adjacent, the first flagged ``True``. Nothing is read
    before it is needed, so an iterator or a file is consumed once, incrementally.

    Parameters
    ----------
    value : str, path or iterable of str and paths
    name : str
        The argument's name, for errors.
    block : int, optional
        Longest piece (``BLOCK_CHARS`` by default; 0: whole documents).
    """
    size = BLOCK_CHARS if block is None else block
    if isinstance(value, str):
        yield from _split(value, size)
        return
    if isinstance(value, os.PathLike):
        yield from _from_path(Path(value), name, size)
        return
    if not isinstance(value, Iterable) or isinstance(value, bytes | bytearray | dict):
        raise DataTypeError(
            f"{name} must be a str, a path or an iterable of str or paths, got {type(value).__name__}.",
            argument=name,
        )
    for item in value:
        if isinstance(item, str):
            yield from _split(item, size)
        elif isinstance(item, os.PathLike):
            yield from _from_path(Path(item), name, size)
        else:
            raise DataTypeError(
                f"{name} must hold only str documents or paths (pathlib.Path), found {type(item).__name__}.",
                argument=name,
            )


def read_documents(value: Any, name: str) -> list[str]:
    """The whole corpus as a list of documents (for small inputs such as a test set).

    Raises
    ------
    DataError
        When it holds no non-blank document (naming ``name``).
    """
    docs: list[str] = []
    for piece, first in pieces(value, name, block=0):
        if first:
            docs.append(piece)
        else:
            docs[-1] += piece
    if not any(d.strip() for d in docs):
        raise DataError(f"{name} is empty; pass at least one non-blank document.", argument=name)
    return docs
