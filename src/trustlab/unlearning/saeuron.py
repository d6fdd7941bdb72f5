"""SAeUron: concept unlearning in a diffusion model by scaling sparse-autoencoder features.

SAeUron (Cywinski and Deja, ICML 2025) removes a concept from a diffusion model without
touching its weights. A sparse autoencoder (SAE) is trained, unsupervised, on the activations
of one block of the denoiser, every spatial position of every denoising step being one SAE
input. For a concept ``c`` and step ``t`` each SAE feature ``i`` gets the score

``score(i, t, c) = mu(i, t, D_c) / sum_j mu(j, t, D_c) - mu(i, t, D_not_c) / sum_j mu(j, t, D_not_c)``

(``mu`` the feature's mean activation over the generations of the concept, ``D_c``, or of all
other concepts, ``D_not_c``, averaged over positions); the features above the ``percentile``-th
percentile of the step's scores are selected. At generation time the hook replaces the
block's output ``x`` by ``W_dec f' + b_dec + (x - x_hat)``, where ``f'`` is ``f(x)`` with
every selected feature that fires above its average activation over all concepts scaled by
``multiplier * mu(i, t, D_c)`` (``multiplier < 0``: the feature is turned against the
concept), and ``x - x_hat`` the SAE's reconstruction error, kept. One SAE serves any number
of concepts: their selected features are united.

:class:`SAeUron` takes any torch noise predictor ``model(x, t)`` or ``model(x, t,
class_labels=y)`` (``diffusers``' ``UNet2DModel`` included), or a ``diffusers`` pipeline
(its ``.unet`` and its scheduler's schedule), and a hook point, reuses
:class:`~trustlab.explain.sae.SparseAutoencoder` (BatchTopK) and saves to safetensors + JSON.

References
----------
.. [1] B. Cywinski, K. Deja. "SAeUron: Interpretable Concept Unlearning in Diffusion Models
   with Sparse Autoencoders". ICML 2025. arXiv:2501.18052.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab._validation import make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.explain.sae import SparseAutoencoder
from trustlab.unlearning import _saeuron_hooks as hk
from trustlab.unlearning import _saeuron_io as _io
from trustlab.unlearning import _saeuron_sweep as _sweep
from trustlab.unlearning._saeuron_scores import (
    feature_scores,
    frechet_distance,
    scaling_plan,
    select_features,
)
from trustlab.vision.classifiers import one_thread
from trustlab.vision.diffusion import DDPMSchedule, ddim_loop, ddim_timesteps

__all__ = ["SAeUron", "digits_saeuron", "feature_scores", "frechet_distance", "select_features"]


class SAeUron(ParamsValidationMixin, BaseEstimator):
    """Concept unlearning at generation time with a sparse autoencoder on a denoiser block.

    Parameters
    ----------
    model : torch.nn.Module or diffusers pipeline
        Noise predictor: ``model(x, t)`` (unconditional) or ``model(x, t, class_labels=y)``
        (``conditional=True``); ``diffusers``' ``UNet2DModel`` (whose output's ``.sample``
        is read) fits both. A pipeline (any object with ``.unet`` and ``.scheduler``, e.g.
        ``DDPMPipeline`` or ``DDIMPipeline``) gives its ``.unet`` as the denoiser and its
        scheduler's ``alphas_cumprod`` (else ``betas``) as the schedule; its scheduler must
        predict epsilon.
    hook : str or torch.nn.Module
        The block whose output the SAE reads and rewrites (a name from
        ``model.named_modules()``): the paper's up-path cross-attention block of SD; ``"mid"``
        on the lab's UNet (docs/unlearning/saeuron.md measures the blocks).
    conditional : bool, default=True
        ``y`` of :meth:`fit` / :meth:`generate` is passed as ``class_labels`` (the concept is
        the prompt, as in the paper). ``False``: the model is unconditional and ``y`` of
        :meth:`fit` only labels the generations (e.g. a classifier's verdict on them).
    guidance_scale : float, default=1.0
        Classifier-free guidance ``w`` for conditional models (1: none; the paper samples
        Stable Diffusion at 9). The hook acts on both halves of the guided batch, as the
        authors' does.
    null_label : int, optional
        The unconditional class for guidance; default ``model.n_classes``.
    num_inference_steps : int, default=20
        DDIM steps; the SAE is trained and the scores computed on each of them.
    schedule : DDPMSchedule, optional
        The model's training schedule; default :class:`~trustlab.vision.DDPMSchedule`, or a
        pipeline's own scheduler (a schedule given beside a pipeline must match it).
    sae : SparseAutoencoder, optional
        Template (cloned, then fitted). Default: the paper's BatchTopK SAE, expansion 16,
        ``k = min(32, max(1, d // 8))``, learning rate 4e-4, batch 4096, 2,000 steps.
    percentile : float, default=99.99
        Feature-selection percentile ``tau`` (the paper's 99.99 for objects).
    multiplier : float, default=-1.0
        ``gamma``, negative (the paper's -1 for styles; objects are swept over -1 .. -30).
    preserve_error : bool, default=True
        Add the SAE's reconstruction error back (the authors' default).
    score_against : {"all", "retained"}, default="all"
        Which generations form ``D_not_c`` when several concepts are removed at once: all
        other concepts (the paper's score, the authors' code), or only the concepts kept
        (the co-removed ones left out, so features the removed concepts share are not
        penalised and features a kept concept uses are; see docs/unlearning/saeuron.md).
        One concept: the same.
    max_sae_rows : int, default=200000
        At most this many patches (drawn without replacement) train the SAE.
    random_state : int, numpy Generator or None, default=0
        Seeds the SAE and the row draw.

    Attributes
    ----------
    sae_ : SparseAutoencoder
    denoiser_ : torch.nn.Module
        The noise predictor hooked and sampled: ``model``, or a pipeline's ``.unet``.
    alphas_cumprod_ : ndarray of float64
        The schedule DDIM samples with (``schedule``'s, or the pipeline scheduler's).
    from_pipeline_ : bool
        Whether ``model`` was a pipeline.
    classes_ : ndarray
        The concepts (sorted labels of ``y``).
    timesteps_ : ndarray of int
        The DDIM timesteps, descending.
    concept_means_ : ndarray of shape (n_concepts, n_steps, n_latents)
        ``mu(i, t, D_c)``.
    counts_ : ndarray of shape (n_concepts,)
    mean_activation_ : ndarray of shape (n_steps, n_latents)
        Average of ``concept_means_`` over concepts (the mask threshold).
    concept_params_ : dict
        Concept -> ``(percentile, multiplier)`` chosen by :meth:`tune` (empty after ``fit``:
        every concept uses :attr:`percentile` and :attr:`multiplier`).

    References
    ----------
    .. [1] Cywinski, Deja. "SAeUron: Interpretable Concept Unlearning in Diffusion Models with
       Sparse Autoencoders". ICML 2025.

    Examples
    --------
    >>> from trustlab.vision import digits_conditional_ddpm
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> rng = np.random.default_rng(0)
    >>> tiny = SparseAutoencoder(64, architecture="batchtopk", k=4, batch_size=256, n_steps=20)
    >>> su = SAeUron(digits_conditional_ddpm(), "mid", num_inference_steps=4, sae=tiny)
    >>> su = su.fit(rng.standard_normal((20, 1, 8, 8)), np.arange(20) % 2)
    >>> su.concept_means_.shape
    (2, 4, 64)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "model": "no_validation",
        "hook": "no_validation",
        "conditional": ["boolean"],
        "guidance_scale": [Interval(numbers.Real, 0, None, closed="left")],
        "null_label": [None, Interval(numbers.Integral, 0, None, closed="left")],
        "num_inference_steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "schedule": [None, DDPMSchedule],
        "sae": [None, SparseAutoencoder],
        "percentile": [Interval(numbers.Real, 0, 100, closed="left")],
        "multiplier": [Interval(numbers.Real, None, None, closed="neither")],
        "preserve_error": ["boolean"],
        "score_against": [Options({"all", "retained"})],
        "max_sae_rows": [Interval(numbers.Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        model: Any,
        hook: Any,
        *,
        conditional: bool = True,
        guidance_scale: float = 1.0,
        null_label: int | None = None,
        num_inference_steps: int = 20,
        schedule: DDPMSchedule | None = None,
        sae: SparseAutoencoder | None = None,
        percentile: float = 99.99,
        multiplier: float = -1.0,
        preserve_error: bool = True,
        score_against: str = "all",
        max_sae_rows: int = 200_000,
        random_state: Any = 0,
    ) -> None:
        self.model = model
        self.hook = hook
        self.conditional = conditional
        self.guidance_scale = guidance_scale
        self.null_label = null_label
        self.num_inference_steps = num_inference_steps
        self.schedule = schedule
        self.sae = sae
        self.percentile = percentile
        self.multiplier = multiplier
        self.preserve_error = preserve_error
        self.score_against = score_against
        self.max_sae_rows = max_sae_rows
        self.random_state = random_state

    # ------------------------------------------------------------------ helpers
    def _setup(self) -> None:
        self._validate_params()
        self.denoiser_, acp, self.from_pipeline_ = hk.resolve_model(self.model, self.schedule)
        self.module_ = hk.resolve_hook(self.denoiser_, self.hook)
        if self.num_inference_steps > len(acp):
            raise ParameterError(
                f"num_inference_steps must be at most the schedule's {len(acp)}; "
                f"got {self.num_inference_steps}.",
                argument="num_inference_steps",
            )
        self.alphas_cumprod_ = acp
        self.timesteps_ = ddim_timesteps(len(acp), int(self.num_inference_steps))
        null = self.null_label if self.null_label is not None else getattr(self.denoiser_, "n_classes", None)
        if self.conditional and self.guidance_scale != 1.0 and null is None:
            raise ParameterError(
                "guidance needs an unconditional class: pass null_label (or guidance_scale=1).",
                argument="null_label",
            )
        self.null_ = None if null is None else int(null)

    def _labels(self, y: Any, n: int) -> Any:
        if not self.conditional:
            return None
        arr = np.asarray(y)
        if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
            raise DataError(
                f"y must be {n} integer class labels (the concept of each generation); got {arr.shape} "
                f"{arr.dtype}.",
                argument="y",
            )
        return torch.as_tensor(arr.astype(np.int64))

    def _sample(self, x: Any, labels: Any) -> Any:
        eps = hk.guided_eps(self.denoiser_, labels, float(self.guidance_scale), self.null_)
        with one_thread(), torch.no_grad():
            return ddim_loop(eps, x, self.alphas_cumprod_, self.timesteps_)

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any) -> SAeUron:
        """Generate from starting noise ``X``, train the SAE on the hook's activations, score.

        Parameters
        ----------
        X : array-like of shape (n, C, H, W)
            Starting noise ``x_T``, one generation per row.
        y : array-like of shape (n,)
            The concept of each generation: its class label (``conditional``: also the
            prompt), at least two distinct concepts.

        Returns
        -------
        SAeUron
            ``self``, fitted.
        """
        self._setup()
        x = hk.check_noise(X)
        n = x.shape[0]
        y_arr = np.asarray(y)
        if y_arr.ndim != 1 or len(y_arr) != n:
            raise DataError(
                f"y must be a 1-d array of {n} concept labels; got shape {y_arr.shape}.", argument="y"
            )
        self.classes_, y_idx = np.unique(y_arr, return_inverse=True)
        if len(self.classes_) < 2:
            raise DataError("y must hold at least two concepts (the score compares them).", argument="y")
        labels = self._labels(y_arr, n)
        guided = labels is not None and float(self.guidance_scale) != 1.0
        acts: list[Any] = []
        with hk.capture(self.module_, acts, (lambda a: a.chunk(2)[1]) if guided else (lambda a: a)):
            self._sample(x, labels)
        if len(acts) != len(self.timesteps_):
            raise DataError(
                f"the hook point ran {len(acts)} times over {len(self.timesteps_)} steps; choose a block "
                "that runs once per model call.",
                argument="hook",
            )
        rows = [hk.to_rows(a)[0].float() for a in acts]  # per step: (n * P, d)
        per = rows[0].shape[0] // n
        all_rows = torch.cat(rows).numpy()
        rng = make_generator(self.random_state)
        if len(all_rows) > self.max_sae_rows:
            all_rows = all_rows[np.sort(rng.choice(len(all_rows), int(self.max_sae_rows), replace=False))]
        d = all_rows.shape[1]
        template = self.sae or SparseAutoencoder(
            16 * d, architecture="batchtopk", k=min(32, max(1, d // 8)), learning_rate=4e-4, batch_size=4096
        )
        sae = clone(template).set_params(random_state=int(rng.integers(2**31 - 1)))
        with one_thread():
            self.sae_ = sae.fit(all_rows)
        self._tsae = hk.TorchSAE(self.sae_)
        with one_thread(), torch.no_grad():  # per-sample mean latent over positions, per step: (n, S, m)
            lat = torch.stack([self._tsae.encode(r).reshape(n, per, -1).mean(1) for r in rows], 1).numpy()
        self.counts_ = np.bincount(y_idx, minlength=len(self.classes_))
        self.concept_means_ = np.stack([lat[y_idx == c].mean(0) for c in range(len(self.classes_))])
        self.mean_activation_ = self.concept_means_.mean(0)
        self.concept_params_: dict[Any, tuple[float, float]] = {}
        return self

    # ------------------------------------------------------------------ selection
    def _index(self, concept: Any) -> int:
        hits = np.flatnonzero(self.classes_ == concept)
        if len(hits) != 1:
            raise ParameterError(
                f"unlearn must hold concepts SAeUron was fitted on ({self.classes_.tolist()}); "
                f"got {concept!r}.",
                argument="unlearn",
            )
        return int(hits[0])

    def feature_scores(self, concept: Any) -> np.ndarray:
        """:func:`feature_scores` of a fitted concept, shape ``(n_steps, n_latents)``.

        Parameters
        ----------
        concept : label
            One of :attr:`classes_`.

        Returns
        -------
        ndarray
        """
        check_is_fitted(self, "concept_means_")
        return feature_scores(self.concept_means_, self._index(concept), counts=self.counts_)

    def selected_features(self, unlearn: Any, *, percentile: float | None = None) -> list[np.ndarray]:
        """The features scaled at each step to remove the concepts ``unlearn`` (united).

        Parameters
        ----------
        unlearn : label or list of labels
        percentile : float, optional
            Default :attr:`percentile`.

        Returns
        -------
        list of ndarray
            Sorted feature indices per step.
        """
        return [f for f, _ in self._plan(unlearn, percentile, None)]

    def _concepts(self, unlearn: Any) -> list[Any]:
        items = list(unlearn) if isinstance(unlearn, list | tuple | np.ndarray) else [unlearn]
        return [self.classes_[self._index(c)] for c in items]

    def _plan(self, unlearn: Any, percentile: Any, multiplier: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        check_is_fitted(self, "concept_means_")
        removed = self._concepts(unlearn)
        return scaling_plan(
            self.concept_means_,
            self.counts_,
            [self._index(c) for c in removed],
            [self.concept_params_.get(c, (self.percentile, self.multiplier)) for c in removed],
            percentile,
            multiplier,
            self.score_against,
        )

    def tune(
        self,
        X: Any,
        y: Any,
        judge: Any,
        *,
        percentiles: Any = (90.0, 95.0, 99.0),
        multipliers: Any = (-1.0, -5.0, -10.0, -15.0, -20.0, -25.0, -30.0),
        concepts: Any = None,
    ) -> pd.DataFrame:
        """Pick each concept's ``(percentile, multiplier)`` by the authors' object-unlearning sweep.

        For every concept and grid point, generate from ``X`` with the concept removed and
        judge the images: unlearning accuracy ``UA`` (share of the concept's rows no longer
        judged the concept) and in-domain retain accuracy ``IRA`` (share of the other rows
        judged their label); keep the point with the largest ``(UA + IRA) / 2`` (the first on
        ties) in :attr:`concept_params_`, which :meth:`generate` and :meth:`unlearning` then
        use for that concept.

        Parameters
        ----------
        X : array-like of shape (n, C, H, W)
            Validation starting noise.
        y : array-like of shape (n,)
            Reference labels: the prompts (conditional), or the judge's verdicts on the
            unedited generations (unconditional).
        judge : callable
            ``judge(images)`` returns one label per image (e.g. a classifier trained on real
            data, as UnlearnCanvas judges).
        percentiles, multipliers : sequence of float
            The grid (the paper's multipliers; percentiles for a dictionary of hundreds of
            features instead of 20,480).
        concepts : list of labels, optional
            Default all :attr:`classes_`.

        Returns
        -------
        pandas.DataFrame
            One row per concept and grid point: ``concept, percentile, multiplier, UA, IRA,
            score, chosen``.
        """
        return _sweep.sweep(self, X, y, judge, percentiles, multipliers, concepts)

    # ------------------------------------------------------------------ intervention
    @contextlib.contextmanager
    def unlearning(
        self, unlearn: Any, *, percentile: float | None = None, multiplier: float | None = None
    ) -> Iterator[hk.Intervention]:
        """Install the intervention on :attr:`denoiser_`'s block (any sampler may run inside).

        The hook maps the model's current timestep to the nearest fitted step, so a
        ``diffusers`` scheduler or pipeline with the same DDIM timesteps runs unchanged
        (e.g. ``with su.unlearning(3): pipeline(num_inference_steps=...)``).

        Parameters
        ----------
        unlearn : label or list of labels
            The concepts to remove (one SAE, several concepts).
        percentile, multiplier : float, optional
            Override :attr:`percentile` / :attr:`multiplier`.

        Yields
        ------
        Intervention
            Its ``n_scaled`` counts the (patch, feature) pairs scaled so far.
        """
        plan = self._plan(unlearn, percentile, multiplier)
        with hk.timestep_tracker(self.denoiser_) as tracker:
            hook = hk.Intervention(
                self._tsae,
                self.timesteps_,
                [f for f, _ in plan],
                [v for _, v in plan],
                [self.mean_activation_[s, f] for s, (f, _) in enumerate(plan)],
                bool(self.preserve_error),
                tracker,
            )
            handle = self.module_.register_forward_hook(hook)
            try:
                yield hook
            finally:
                handle.remove()

    def generate(
        self,
        X: Any,
        y: Any = None,
        *,
        unlearn: Any = (),
        percentile: float | None = None,
        multiplier: float | None = None,
    ) -> np.ndarray:
        """DDIM generations from starting noise ``X`` with the concepts ``unlearn`` removed.

        Parameters
        ----------
        X : array-like of shape (n, C, H, W)
            Starting noise.
        y : array-like of shape (n,), optional
            Class labels (prompts) for a conditional model.
        unlearn : label or list of labels, default=()
            Concepts to remove; empty: the model as it is.
        percentile, multiplier : float, optional
            Override the fitted defaults.

        Returns
        -------
        ndarray of shape (n, C, H, W)
            float32 images in [0, 1].
        """
        check_is_fitted(self, "concept_means_")
        x = hk.check_noise(X)
        if self.conditional and y is None:
            raise DataError(
                "y (class labels, the prompts) is required for a conditional model.", argument="y"
            )
        labels = self._labels(y, x.shape[0])
        empty = isinstance(unlearn, list | tuple) and len(unlearn) == 0
        ctx = (
            contextlib.nullcontext()
            if empty
            else self.unlearning(unlearn, percentile=percentile, multiplier=multiplier)
        )
        with ctx:
            x0 = self._sample(x, labels)
        return ((x0.clamp(-1, 1) + 1) / 2).numpy().astype(np.float32)

    def save(self, path: Any) -> Any:
        """Write the fitted state into the folder ``path`` (``saeuron.safetensors`` + ``.json``).

        The SAE and concept means (float64); the parameters, hook name, concepts, per-concept
        sweep, a checksum and a fingerprint of :attr:`model` (the denoiser is not saved).

        Parameters
        ----------
        path : str or Path
            A folder (created if missing; its two files are overwritten).

        Returns
        -------
        Path
            The folder.
        """
        return _io.save(self, path)

    @classmethod
    def load(cls, path: Any, model: Any, *, check_weights: bool = True) -> SAeUron:
        """A fitted SAeUron from a folder written by :meth:`save`, on the denoiser ``model``.

        Parameters
        ----------
        path : str or Path
        model : torch.nn.Module or diffusers pipeline
            The denoiser (or pipeline) it was fitted on: same parameter names and shapes, the
            same noise schedule and (with ``check_weights``) the same weights, else
            :class:`~trustlab.errors.ModelError`.
        check_weights : bool, default=True
            ``False``: accept other weights of the same architecture (e.g. a fine-tuned copy).

        Returns
        -------
        SAeUron
            Generating bit for bit what the saved one did. A changed or truncated file raises
            :class:`~trustlab.errors.DataError`.
        """
        return _io.load(cls, path, model, check_weights=bool(check_weights))


def digits_saeuron(*, hook: str = "mid", refit: bool = False) -> SAeUron:
    """SAeUron fitted on the vision lab's class-conditional digit DDPM (shipped state).

    The recipe: :func:`~trustlab.vision.digits_conditional_ddpm`, the block ``hook``, 10 DDIM
    steps, guidance 2, 40 generations per digit (seed 0), a BatchTopK SAE of 512 features with
    ``k = 4`` (600 Adam steps, batch 1,024, learning rate 3e-3), percentile 90, multiplier -10,
    then the per-digit sweep of :meth:`SAeUron.tune`. The fits at ``"mid"`` (the bottleneck,
    the first block whose output decides the digit) and ``"down2"`` ship with trustlab.

    Parameters
    ----------
    hook : str, default="mid"
        ``"mid"`` or ``"down2"`` (shipped; 32 channels at 4 x 4 positions), or any block of
        the lab UNet with ``refit=True`` (e.g. ``"up1"``).
    refit : bool, default=False
        Fit from the recipe (about 15 s of CPU) instead of loading; no sweep: call ``tune``.

    Returns
    -------
    SAeUron
        Fitted; ``classes_`` are the digits 0-9.

    Examples
    --------
    >>> su = digits_saeuron()
    >>> su.hook, su.concept_means_.shape
    ('mid', (10, 10, 512))
    """
    from trustlab.unlearning import _saeuron_lab as lab
    from trustlab.vision.diffusion_conditional import digits_conditional_ddpm

    if not refit and hook not in lab.SHIPPED:
        raise ParameterError(
            f"hook must be one of the shipped blocks {sorted(lab.SHIPPED)}, or pass refit=True to "
            f"fit at another block; got {hook!r}.",
            argument="hook",
        )
    su = SAeUron(
        digits_conditional_ddpm(),
        hook,
        guidance_scale=lab.GUIDANCE,
        num_inference_steps=lab.STEPS,
        percentile=lab.PERCENTILE,
        multiplier=lab.MULTIPLIER,
        sae=lab.lab_sae(),
    )
    if refit:
        return su.fit(*lab.lab_data())
    return lab.restore(su, lab.shipped_arrays(hook))
