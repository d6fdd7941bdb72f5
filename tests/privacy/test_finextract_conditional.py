"""Conditional FineXtract (row 001-12): the guidance formula, its CFG reduction, bad input, claim."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab.errors import ModelError, ParameterError, TrustlabError  # noqa: E402
from trustlab.privacy.finextract import DIGITS_THRESHOLD, extraction_score  # noqa: E402
from trustlab.privacy.finextract_conditional import (  # noqa: E402
    conditional_guided_eps,
    conditional_guided_sample,
    finextract_conditional,
)
from trustlab.vision.classifiers import one_thread  # noqa: E402
from trustlab.vision.diffusion_conditional import make_conditional_unet  # noqa: E402
from trustlab.vision.diffusion_digits_conditional import (  # noqa: E402
    ConditionalDigitsPairRecipe,
    conditional_digits_finetune_images,
    digits_conditional_ddpm_pair,
)


class Toy(torch.nn.Module):
    """eps(x, t, c) = a * x + b * c (a condition tensor broadcast over pixels)."""

    def __init__(self, a: float, b: float) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(float(a)))
        self.b = torch.nn.Parameter(torch.tensor(float(b)))

    def forward(self, x, t, cond=None):
        return self.a * x + self.b * cond.float()[:, None, None, None]


@pytest.fixture(scope="module")
def tiny():
    return make_conditional_unet(channels=4, seed=1), make_conditional_unet(channels=4, seed=0)


def test_guidance_formula_equals_a_hand_computation():
    ft, pre = Toy(2.0, 1.0), Toy(1.0, 3.0)
    x, t = torch.full((2, 1, 2, 2), 0.5), torch.zeros(2, dtype=torch.long)
    c, null = torch.tensor([4.0]), torch.tensor([0.0])
    with torch.no_grad():
        got = conditional_guided_eps(
            ft, pre, x, t, c, null, guidance_scale=3.0, correction=-0.02, condition_kwarg="cond"
        )
    e_ft = 2.0 * 0.5 + 1.0 * 4.0  # fine-tuned model, the prompt
    base = 1.0 * 0.5 + 3.0 * 0.0  # pretrained model, the empty prompt
    np.testing.assert_allclose(got.numpy(), base + 3.0 * (e_ft - base) - 0.02 * base, rtol=1e-6)
    # without the base model: the fine-tuned model's own CFG, eps(null) + w (eps(c) - eps(null))
    with torch.no_grad():
        cfg = conditional_guided_eps(
            ft, None, x, t, c, null, guidance_scale=3.0, correction=0.0, condition_kwarg="cond"
        )
    e_null = 2.0 * 0.5
    np.testing.assert_allclose(cfg.numpy(), e_null + 3.0 * (e_ft - e_null), rtol=1e-6)
    # the released code's other mode: the base conditioned on the prompt too, no correction
    with torch.no_grad():
        mg = conditional_guided_eps(
            ft, pre, x, t, c, null, correction=0.0, condition_kwarg="cond", base_condition="prompt"
        )
    base_c = 1.0 * 0.5 + 3.0 * 4.0
    np.testing.assert_allclose(mg.numpy(), base_c + 3.0 * (e_ft - base_c), rtol=1e-6)


def test_unit_scale_without_correction_is_the_finetuned_models_cfg(tiny):
    ft, pre = tiny
    x, t = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(0)), torch.full((3,), 400)
    with torch.no_grad(), one_thread():
        got = conditional_guided_eps(ft, pre, x, t, 7, 10, guidance_scale=1.0, correction=0.0)
        cond = ft(x, t, class_labels=torch.full((3,), 7))  # CFG with scale 1 = the conditional prediction
    torch.testing.assert_close(got, cond)
    # and sampling: w' = 1, k = 0 with the base equals the fine-tuned model's CFG at scale 1
    kw = dict(prompt=7, guidance_scale=1.0, correction=0.0, num_inference_steps=4, random_state=3)
    np.testing.assert_allclose(
        conditional_guided_sample(ft, pre, 2, **kw), conditional_guided_sample(ft, None, 2, **kw), atol=1e-6
    )


def test_base_with_the_empty_prompt_moves_the_samples(tiny):
    ft, pre = tiny
    kw = dict(prompt=2, num_inference_steps=4, random_state=1)
    a = conditional_guided_sample(ft, pre, 3, **kw)
    b = conditional_guided_sample(ft, None, 3, guidance_scale=3.0, **kw)
    assert np.abs(a - b).max() > 1e-3 and 0 <= a.min() and a.max() <= 1


def test_positional_condition_and_embedding_prompts():
    ft, pre = Toy(0.1, 0.2), Toy(0.1, 0.1)
    emb = np.ones((1, 1))  # a (1, D) "prompt embedding", broadcast over the batch
    out = conditional_guided_sample(
        ft, pre, 2, prompt=emb[:, 0], null_prompt=np.zeros(1), condition_kwarg=None, num_inference_steps=3
    )
    assert out.shape == (2, 1, 8, 8)


def test_bad_inputs(tiny):
    ft, pre = tiny
    with pytest.raises(ParameterError, match="prompt"):
        conditional_guided_sample(ft, pre, 2, prompt=None, num_inference_steps=2)
    with pytest.raises(ParameterError, match="prompt"):
        conditional_guided_sample(ft, pre, 2, prompt=torch.tensor([1, 2, 3]), num_inference_steps=2)
    with pytest.raises(ParameterError, match="null_prompt"):
        conditional_guided_sample(Toy(1, 1), Toy(1, 1), 2, prompt=1.0, condition_kwarg="cond")
    with pytest.raises(ParameterError, match="correction"):
        conditional_guided_sample(ft, None, 2, prompt=1, correction=-0.02)
    with pytest.raises(ParameterError, match="base_condition"):
        conditional_guided_sample(ft, None, 2, prompt=1, base_condition="prompt")
    with pytest.raises(TrustlabError, match="base_condition"):
        conditional_guided_sample(ft, pre, 2, prompt=1, base_condition="uncond")
    with pytest.raises(ModelError, match="condition_kwarg"):
        conditional_guided_sample(
            ft, pre, 2, prompt=1, condition_kwarg="encoder_hidden_states", num_inference_steps=2
        )
    with pytest.raises(ModelError, match="architecture"):
        finextract_conditional(ft, make_conditional_unet(channels=8), 1, prompt=1, n_generations=2)
    with pytest.raises(ParameterError, match="n_generations"):
        finextract_conditional(ft, pre, 5, prompt=1, n_generations=4)
    with pytest.raises(ParameterError, match="recipe"):
        digits_conditional_ddpm_pair(ConditionalDigitsPairRecipe(finetune_class=2))


@pytest.mark.parametrize("w", [float("nan"), "3"])
def test_bad_guidance_scale_is_a_trustlab_error(tiny, w):
    with pytest.raises(TrustlabError, match="guidance_scale"):
        conditional_guided_sample(*tiny, 1, prompt=1, guidance_scale=w, num_inference_steps=1)


def _copies(generations, secret):
    g, s = generations.reshape(len(generations), -1), secret.reshape(len(secret), -1)
    return np.sqrt(((g[:, None] - s[None]) ** 2).mean(-1)).min(1) < DIGITS_THRESHOLD


def _sign_p(better, worse):
    from scipy.stats import binomtest

    b, c = int(np.sum(better & ~worse)), int(np.sum(worse & ~better))
    return binomtest(b, b + c, 0.5, alternative="greater").pvalue if b + c else 1.0


# (digits 0-5 pretrained -> fine-tuned on one of 6-9) and (4-9 -> one of 0-3): eight "prompts"
_SPLITS = [((0, 1, 2, 3, 4, 5), c) for c in (6, 7, 8, 9)] + [((4, 5, 6, 7, 8, 9), c) for c in (0, 1, 2, 3)]


@pytest.mark.slow  # 8 conditional pairs: a second base (~80 s CPU) and 7 fine-tunes (~10 s each), cached once
@pytest.mark.claims
def test_claim_conditional_finextract_beats_the_finetuned_models_cfg():
    """Eight fine-tuned models x 8 images; N = 160 (20 N0), 50 DDIM steps, the same starts in both arms.

    FineXtract at the paper's defaults (w' = 3, k = -0.02, the pretrained model's empty-prompt
    prediction as the base) against the paper's baseline, classifier-free guidance (scale 3) of
    the fine-tuned model with the prompt; both then the same clique clustering.

    Measured: 748/1280 guided generations copy a fine-tuning image vs 517/1280 (sign test on
    the 1,280 shared starts p < 1e-20; asserted p < 0.001). The extracted candidates: 41/64
    vs 35/64 (13 vs 7 discordant images, one-sided p = 0.13): more, but NOT significantly at
    64 images. Asserted: the paper's ~20% floor, and non-inferiority within two standard
    errors of the paired difference (sqrt(b + c) / 64).
    """
    copies_g, copies_d, hits_g, hits_d = [], [], [], []
    for pretrain_classes, c in _SPLITS:
        recipe = ConditionalDigitsPairRecipe(pretrain_classes=pretrain_classes, finetune_class=c)
        pre, ft = digits_conditional_ddpm_pair(recipe)
        secret = conditional_digits_finetune_images(recipe)
        kw = dict(prompt=c, n_generations=160, num_inference_steps=50, random_state=0)
        g = finextract_conditional(ft, pre, 8, **kw)
        d = finextract_conditional(ft, None, 8, **kw)
        copies_g.append(_copies(g.generations, secret))
        copies_d.append(_copies(d.generations, secret))
        hits_g.append(extraction_score(g.candidates, secret).extracted)
        hits_d.append(extraction_score(d.candidates, secret).extracted)
    cg, cd = np.concatenate(copies_g), np.concatenate(copies_d)
    hg, hd = np.concatenate(hits_g), np.concatenate(hits_d)
    disc = int(np.sum(hg != hd))
    print(
        "copies",
        int(cg.sum()),
        int(cd.sum()),
        "extracted",
        int(hg.sum()),
        int(hd.sum()),
        "p",
        _sign_p(hg, hd),
    )
    assert cg.mean() > cd.mean() and _sign_p(cg, cd) < 1e-3
    assert hg.mean() >= 0.2
    assert hg.mean() - hd.mean() >= -2 * np.sqrt(disc) / len(hg)
