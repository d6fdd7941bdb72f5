"""The one line a user error prints on the command line, shared by every subcommand.

Every ``trustlab`` command turns a :class:`~trustlab.errors.TrustlabError` into one line on
stderr, ``error (FLAG): message``, and exit code 2: never a traceback. The flag is the
command's name for the library argument the error names (``n_latents`` is ``--latents``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from trustlab.errors import TrustlabError

stderr = Console(stderr=True)
"""The console every command writes its notes, warnings and errors to."""


def one_line(text: Any) -> str:
    """``text`` as one line: every run of white space (newlines included) becomes one space."""
    return " ".join(str(text).split())


def error_line(exc: TrustlabError, flags: Mapping[str, str]) -> str:
    """The line printed for a user error: the flag (or argument) it names and the library's message.

    Parameters
    ----------
    exc : TrustlabError
        The error; ``exc.argument`` names the library argument at fault, if any.
    flags : mapping of str to str
        The command's flag for each library argument. A message that opens with the
        argument's name (or ``"<name> of Audit"``, ``"<name> of draft_schema"``) opens with
        the flag instead, so that the line speaks the command's language.

    Returns
    -------
    str
        ``"error (FLAG): message"``, or ``"error: message"`` when no argument is named.
    """
    arg = exc.argument
    msg = one_line(exc)
    flag = flags.get(arg) if arg else None
    if arg and flag:
        for prefix in (f"{arg} of Audit", f"{arg} of draft_schema", arg):
            if msg.startswith(prefix) and msg[len(prefix) : len(prefix) + 1] in (" ", ":"):
                msg = flag + msg[len(prefix) :]
                break
    label = flag or arg
    return f"error ({label}): {msg}" if label else f"error: {msg}"


def fail(exc: TrustlabError, flags: Mapping[str, str]) -> NoReturn:
    """Print :func:`error_line` on stderr and exit with code 2."""
    head, _, rest = error_line(exc, flags).partition(":")
    stderr.print(f"[bold red]{escape(head)}:[/]{escape(rest)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)
