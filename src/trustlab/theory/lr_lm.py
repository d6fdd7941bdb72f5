"""Learning-rate schedules on a lab language model, beside the convex bound fitted to the run.

Schaipp, Hagele, Taylor, Simsekli & Bach (ICML 2025) train Llama-style models with AdamW under
several schedules and show that the last-iterate bound of non-smooth convex SGD,
``Omega_t = D^2 a_t + G^2 b_t`` (:func:`~trustlab.theory.lr_schedules.schedule_bound` evaluated
on the rates up to step ``t``), reproduces the loss curves: the sudden drop during a cooldown,
and the ordering of schedules at their tuned base rates. :func:`lm_schedule_study` runs this at
toy scale: a tiny Llama of :mod:`trustlab.lm` on the lab's English corpus (CPython's pydoc
topics, byte-level BPE), AdamW with the schedule ``gamma * s_t``, held-out loss at checkpoints,
and the constants ``(L*, D^2, G^2)`` of ``loss_t ~ L* + D^2 a_t + G^2 b_t`` fitted by
non-negative least squares to every run's curve at once. See ``docs/theory/lr-schedules.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, MissingDependencyError
from trustlab.theory.lr_schedules import SCHEDULES, _terms, schedule

__all__ = ["LMScheduleStudy", "bound_terms", "lm_schedule_study"]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_FRAC = Interval(numbers.Real, 0, 1, closed="neither")


@validate_params(
    {
        "shape": ["array-like"],
        "gamma": [Interval(numbers.Real, 0, None, closed="neither")],
        "checkpoints": ["array-like"],
    }
)
def bound_terms(shape: Any, gamma: float, checkpoints: Any) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients ``(a_t, b_t)`` of ``Omega_t = D^2 a_t + G^2 b_t`` at each checkpoint ``t``.

    ``Omega_t`` is the bound on ``f(x_t) - f*`` of SGD run with the rates ``gamma * s_1..s_t``
    (the rates of the steps taken before ``x_t``): ``a_t = 1 / (2 eta_{1:t})`` and ``b_t`` the
    rest of :func:`~trustlab.theory.lr_schedules.schedule_bound`'s ``B gamma`` with ``G = 1``.

    Parameters
    ----------
    shape : array-like
        ``s_1..s_T``, positive.
    gamma : float
        Base rate (> 0).
    checkpoints : array-like of int
        Steps ``t`` in ``[2, T]``.

    Returns
    -------
    a, b : numpy.ndarray
        One entry per checkpoint.

    References
    ----------
    F. Schaipp et al., ICML 2025, Section 3 (the bound ``Omega_t`` plotted against training curves).

    Examples
    --------
    >>> a, b = bound_terms(schedule("wsd", 100), 0.1, [50, 100])
    >>> bool(a[1] < a[0]) and bool(b[1] < b[0])  # the cooldown lowers both terms
    True
    """
    s = check_numeric_array(shape, "shape", ndim=1, min_rows=2)
    if np.any(s <= 0):
        raise DataError(
            f"shape must be positive at every step (rate multipliers), got a minimum of {s.min():g}; "
            "end a cooldown at a small positive rate instead of 0.",
            argument="shape",
        )
    ts = np.asarray(checkpoints, dtype=int)
    if ts.ndim != 1 or np.any(ts < 2) or np.any(ts > len(s)):
        raise DataError(
            f"checkpoints must be steps in [2, {len(s)}], got {np.asarray(checkpoints).tolist()}.",
            argument="checkpoints",
        )
    a = np.empty(len(ts))
    b = np.empty(len(ts))
    for i, t in enumerate(ts):
        s1, s2, last = _terms(s[:t])
        a[i] = 1 / (2 * gamma * s1)
        b[i] = gamma * (s2 / (2 * s1) + last / 2)
    return a, b


@dataclass(frozen=True)
class LMScheduleStudy:
    """Held-out loss curves of a lab LM per schedule, base rate and seed, and the fitted bound.

    Attributes
    ----------
    schedules : tuple of str
    gammas : numpy.ndarray
    steps : int
    checkpoints : numpy.ndarray
        Steps after which the held-out loss was measured.
    loss : numpy.ndarray
        ``(len(schedules), len(gammas), n_seeds, len(checkpoints))`` held-out loss (nats/token).
    bound : numpy.ndarray
        ``(len(schedules), len(gammas), len(checkpoints))`` fitted ``L* + D^2 a_t + G^2 b_t``.
    fit : tuple of float
        ``(L*, D^2, G^2)``, non-negative least squares on the seed-mean curves (checkpoints
        from ``fit_from * steps`` on).
    residual : float
        Root-mean-square error of that fit (nats).
    best_gamma, predicted_gamma : numpy.ndarray
        Per schedule, the grid rate with the lowest mean final loss, and with the lowest fitted bound.
    tuned_loss, tuned_bound : numpy.ndarray
        Per schedule, the lowest mean final loss over the grid, and the fitted bound's lowest
        final value over the grid.
    seed_sd : numpy.ndarray
        Per schedule, the seed standard deviation of the final loss at the measured best rate
        (``nan`` with one seed).

    See Also
    --------
    lm_schedule_study : computes it.
    """

    schedules: tuple[str, ...]
    gammas: np.ndarray
    steps: int
    checkpoints: np.ndarray
    loss: np.ndarray
    bound: np.ndarray
    fit: tuple[float, float, float]
    residual: float
    best_gamma: np.ndarray
    predicted_gamma: np.ndarray
    tuned_loss: np.ndarray
    tuned_bound: np.ndarray
    seed_sd: np.ndarray

    def drop(self, name: str, start: float, gamma: float | None = None) -> tuple[float, float]:
        """Measured and fitted-bound loss decrease from the checkpoint nearest ``start * T`` to the end.

        Parameters
        ----------
        name : str
            A schedule of the study.
        start : float
            Fraction of training, in ``[0, 1)`` (e.g. ``0.8``: where a 20 % cooldown starts).
        gamma : float, optional
            A grid rate; default the schedule's measured best.

        Returns
        -------
        measured, predicted : float
            Seed-mean loss decrease and the fitted bound's decrease.

        Examples
        --------
        >>> one = np.ones(1)
        >>> st = LMScheduleStudy(("wsd",), np.array([0.01]), 100, np.array([50, 80, 100]),
        ...                      np.array([[[[4.0, 3.9, 3.6]]]]), np.array([[[4.1, 3.95, 3.7]]]),
        ...                      (3.0, 1.0, 1.0), 0.05, one * 0.01, one * 0.01, one * 3.6, one * 3.7, one)
        >>> [round(x, 3) for x in st.drop("wsd", 0.8)]  # measured, fitted bound: cooldown decrease
        [0.3, 0.25]
        """
        if name not in self.schedules:
            raise DataError(f"name must be one of {self.schedules}, got {name!r}.", argument="name")
        i = self.schedules.index(name)
        j = int(np.argmin(np.abs(self.gammas - (self.best_gamma[i] if gamma is None else gamma))))
        c = int(np.argmin(np.abs(self.checkpoints - start * self.steps)))
        mean = self.loss[i, j].mean(axis=0)
        return float(mean[c] - mean[-1]), float(self.bound[i, j, c] - self.bound[i, j, -1])


@validate_params(
    {
        "gammas": ["array-like"],
        "schedules": [tuple, list],
        "steps": [Interval(numbers.Integral, 10, None, closed="left")],
        "seeds": [tuple, list],
        "n_checkpoints": [Interval(numbers.Integral, 2, None, closed="left")],
        "d_model": [_INT1],
        "n_layers": [_INT1],
        "seq_len": [Interval(numbers.Integral, 2, None, closed="left")],
        "batch_size": [_INT1],
        "weight_decay": [Interval(numbers.Real, 0, None, closed="left")],
        "cooldown": [_FRAC],
        "n_train": [_INT1, None],
        "n_eval": [_INT1],
        "fit_from": [Interval(numbers.Real, 0, 1, closed="left")],
    }
)
def lm_schedule_study(
    gammas: Any,
    *,
    schedules: tuple[str, ...] | list[str] = ("constant", "cosine", "wsd"),
    steps: int = 600,
    seeds: tuple[int, ...] | list[int] = (0,),
    n_checkpoints: int = 20,
    d_model: int = 64,
    n_layers: int = 2,
    seq_len: int = 32,
    batch_size: int = 16,
    weight_decay: float = 0.1,
    cooldown: float = 0.2,
    n_train: int | None = None,
    n_eval: int = 256,
    fit_from: float = 0.5,
) -> LMScheduleStudy:
    """Train a tiny lab Llama with AdamW under each schedule and base rate; fit the bound to it.

    Data: :func:`trustlab.lm.english_corpus`, a 512-token byte-level BPE
    (:func:`trustlab.lm.train_tokenizer`), cut into sequences of ``seq_len + 1`` tokens; a fixed
    random ``n_eval`` of them are held out. Every run starts from the same initialisation per seed
    and sees the same batches (seeded), AdamW (betas 0.9, 0.95, gradient clipping 1, decoupled
    weight decay on matrices) at rate ``gamma * s_t`` with ``s`` from
    :func:`~trustlab.theory.lr_schedules.schedule` (no warm-up: the bound has none). Runs use
    the torch thread count set by the caller. Requires ``torch`` and ``transformers``.

    Parameters
    ----------
    gammas : array-like
        Base (peak) rates, > 0.
    schedules : sequence of str, default ("constant", "cosine", "wsd")
        Names from :data:`~trustlab.theory.lr_schedules.SCHEDULES`.
    steps : int, default 600
    seeds : sequence of int, default (0,)
        Seeds of the initialisation and the batch order.
    n_checkpoints : int, default 20
        Evenly spaced held-out evaluations (the last at ``steps``).
    d_model, n_layers : int, default 64, 2
        Llama width and depth (4 heads, SwiGLU width ``4 d_model``).
    seq_len, batch_size : int, default 32, 16
    weight_decay : float, default 0.1
    cooldown : float, default 0.2
        Cooldown fraction of ``"cooldown"`` and ``"wsd"``.
    n_train : int, optional
        Use only the first ``n_train`` training sequences (default all, about 6,300).
    n_eval : int, default 256
        Held-out sequences.
    fit_from : float, default 0.5
        The bound's constants are fitted to the checkpoints at or after ``fit_from * steps``
        (the early, far-from-convex phase is left out; 0: every checkpoint).

    Returns
    -------
    LMScheduleStudy

    References
    ----------
    F. Schaipp, A. Hagele, A. Taylor, U. Simsekli and F. Bach, "The Surprising Agreement Between
    Convex Optimization Theory and Learning-Rate Scheduling for Large Model Training", ICML 2025
    (Figures 1 and 2: Llama loss curves beside the bound).

    Examples
    --------
    >>> st = lm_schedule_study([3e-3, 1e-2], schedules=("constant", "wsd"), steps=12,
    ...                        n_checkpoints=3, d_model=16, n_layers=1, n_train=64, n_eval=16)
    >>> st.loss.shape, st.bound.shape
    ((2, 2, 1, 3), (2, 2, 3))
    """
    g = check_numeric_array(gammas, "gammas", ndim=1)
    if np.any(g <= 0):
        raise DataError(f"gammas must all be > 0, got {g.tolist()}.", argument="gammas")
    names = tuple(schedules)
    for name in names:
        if name not in SCHEDULES:
            raise DataError(f"schedules must be drawn from {SCHEDULES}, got {name!r}.", argument="schedules")
    if not seeds or not all(isinstance(s, numbers.Integral) and s >= 0 for s in seeds):
        raise DataError(f"seeds must be non-negative integers, got {list(seeds)!r}.", argument="seeds")
    try:
        import torch

        from trustlab.lm import ModelConfig, build_model, encode_texts, english_corpus, train_tokenizer
    except ImportError as exc:  # pragma: no cover - torch is in the dev extra
        raise MissingDependencyError(
            "lm_schedule_study needs torch and transformers; install them with `pip install trustlab[torch]`."
        ) from exc
    texts = english_corpus()
    data = encode_texts(train_tokenizer(texts, 512), texts, int(seq_len) + 1)
    tokens = torch.as_tensor(data.tokens, dtype=torch.long)
    order = np.random.default_rng(12345).permutation(len(tokens))
    held, train = tokens[order[:n_eval]], tokens[order[n_eval:]]
    if n_train is not None:
        train = train[:n_train]
    checkpoints = np.unique(
        np.clip(np.linspace(steps / n_checkpoints, steps, n_checkpoints).round().astype(int), 2, steps)
    )
    shapes = {n: schedule(n, steps, cooldown=cooldown) for n in names}
    loss = np.empty((len(names), len(g), len(seeds), len(checkpoints)))
    cfg = ModelConfig(
        "llama",
        vocab_size=data.vocab_size,
        d_model=d_model,
        n_layers=n_layers,
        n_heads=4,
        max_len=int(seq_len) + 1,
    )

    def nll(model: Any, x: Any) -> Any:
        logits = model(input_ids=x).logits[:, :-1]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))

    for k, seed in enumerate(seeds):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            init = build_model(cfg).state_dict()
        batches = np.random.default_rng(int(seed)).integers(0, len(train), size=(steps, batch_size))
        for i, name in enumerate(names):
            for j, gam in enumerate(g):
                model = build_model(cfg)
                model.load_state_dict(init)
                decay = [p for p in model.parameters() if p.ndim >= 2]
                rest = [p for p in model.parameters() if p.ndim < 2]
                opt = torch.optim.AdamW(
                    [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}],
                    lr=float(gam),
                    betas=(0.9, 0.95),
                )
                c = 0
                for t in range(steps):
                    for group in opt.param_groups:
                        group["lr"] = float(gam * shapes[name][t])
                    model.train()
                    step_loss = nll(model, train[torch.as_tensor(batches[t])])
                    opt.zero_grad(set_to_none=True)
                    step_loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    if t + 1 == checkpoints[c]:
                        model.eval()
                        with torch.no_grad():
                            loss[i, j, k, c] = float(nll(model, held))
                        c += 1
    loss = np.where(np.isfinite(loss), loss, np.inf)
    return _fit(names, g, int(steps), checkpoints, loss, shapes, float(fit_from))


def _fit(
    names: tuple[str, ...],
    g: np.ndarray,
    steps: int,
    checkpoints: np.ndarray,
    loss: np.ndarray,
    shapes: dict[str, np.ndarray],
    fit_from: float,
) -> LMScheduleStudy:
    """Fit ``(L*, D^2, G^2)`` by NNLS on the seed-mean curves and assemble the study."""
    from scipy.optimize import nnls

    terms = np.array(
        [[np.stack(bound_terms(shapes[n], float(gam), checkpoints)) for gam in g] for n in names]
    )
    mean = loss.mean(axis=2)
    use = checkpoints >= min(fit_from * steps, checkpoints[-1])
    ok = np.all(np.isfinite(mean), axis=-1)  # drop diverged runs from the fit
    a = terms[:, :, 0][ok][:, use].ravel()
    b = terms[:, :, 1][ok][:, use].ravel()
    y = mean[ok][:, use].ravel()
    coef, rnorm = nnls(np.stack([np.ones_like(a), a, b], axis=1), y)
    bound = coef[0] + coef[1] * terms[:, :, 0] + coef[2] * terms[:, :, 1]
    final = mean[:, :, -1]
    best = np.argmin(final, axis=1)
    sd = loss[np.arange(len(names)), best, :, -1].std(axis=-1, ddof=1) if loss.shape[2] > 1 else None
    return LMScheduleStudy(
        schedules=names,
        gammas=g,
        steps=steps,
        checkpoints=checkpoints,
        loss=loss,
        bound=bound,
        fit=(float(coef[0]), float(coef[1]), float(coef[2])),
        residual=float(rnorm / math.sqrt(len(y))),
        best_gamma=g[best],
        predicted_gamma=g[np.argmin(bound[:, :, -1], axis=1)],
        tuned_loss=final.min(axis=1),
        tuned_bound=bound[:, :, -1].min(axis=1),
        seed_sd=np.full(len(names), math.nan) if sd is None else sd,
    )
