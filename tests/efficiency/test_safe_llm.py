"""Block-wise post-training pruning of a causal LM: SAFE/SAFE+ (ICML 2025), SparseGPT, Wanda, magnitude."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trustlab.efficiency._alps import alps_prune  # noqa: E402
from trustlab.efficiency._sparsegpt import sparsegpt_prune  # noqa: E402
from trustlab.efficiency.safe_llm import _project, decoder_layers, lm_perplexity, prune_causal_lm  # noqa: E402
from trustlab.errors import DataError, ModelError, ParameterError  # noqa: E402
from trustlab.lm import ModelConfig, build_model  # noqa: E402
from trustlab.vision.classifiers import one_thread  # noqa: E402

VOCAB = 24


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():  # the models are tiny: threads only cost here
        yield


@pytest.fixture(scope="module")
def tiny():
    """A random two-block Llama of width 16 and its calibration sequences (structure tests).

    Its matrices are scaled from the init's std 0.02 to 0.2, so that the blocks are not near
    the identity and the reconstruction errors are not rounding noise."""
    model = build_model(ModelConfig("llama", vocab_size=VOCAB, d_model=16, n_layers=2, n_heads=2), seed=0)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.mul_(10.0)
    calib = np.random.default_rng(0).integers(0, VOCAB, (16, 12))
    return model, calib


def _block_linears(model):
    return [m for b in decoder_layers(model) for m in b.modules() if isinstance(m, torch.nn.Linear)]


@pytest.mark.parametrize(
    "method", ["magnitude", "wanda", "sparsegpt", "alps", "safe", "safe_plus", "safe_obd"]
)
def test_every_block_linear_is_pruned_to_the_sparsity_and_the_rest_stays(tiny, method):
    model, calib = tiny
    before = {k: v.clone() for k, v in model.state_dict().items()}
    pruned = prune_causal_lm(model, calib, method=method, sparsity=0.5, n_steps=2, interval=1, batch_size=8)
    for k, v in model.state_dict().items():  # the input model is not modified
        assert torch.equal(v, before[k])
    for m in _block_linears(pruned):
        zeros = (m.weight == 0).float()
        assert float(zeros.mean()) == 0.5
        if method in ("wanda", "safe_plus"):  # Wanda's comparison group: each output row
            assert torch.all(zeros.mean(1) == 0.5)
    dense = dict(model.named_parameters())
    for name, p in pruned.named_parameters():
        if "embed" in name or "lm_head" in name or "norm" in name:
            assert torch.equal(p, dense[name])


@pytest.mark.parametrize(
    "method", ["magnitude", "wanda", "sparsegpt", "alps", "safe", "safe_plus", "safe_obd"]
)
@pytest.mark.parametrize("pattern", ["2:4", "1:4"])
def test_n_m_pattern_keeps_exactly_n_of_every_m_consecutive_inputs(tiny, method, pattern):
    model, calib = tiny
    n, m = (int(v) for v in pattern.split(":"))
    pruned = prune_causal_lm(
        model, calib, method=method, sparsity=1 - n / m, pattern=pattern, n_steps=2, interval=1, batch_size=8
    )
    for lin in _block_linears(pruned):
        kept = (lin.weight != 0).reshape(lin.weight.shape[0], -1, m).sum(-1)
        assert torch.all(kept == n), (lin, kept.unique())


def _correlated_layer(seed):
    """A random Linear weight (16 x 64) and 256 inputs sharing an 8-dim factor, with per-feature scales."""
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(256, 8, generator=g) @ torch.randn(8, 64, generator=g)
    x = (f + 0.5 * torch.randn(256, 64, generator=g)) * torch.exp(0.5 * torch.randn(64, generator=g))
    return torch.randn(16, 64, generator=g), x


@pytest.mark.parametrize("nm", [None, (2, 4)])
@pytest.mark.parametrize("seed", [0, 1])
def test_sparsegpt_reconstructs_a_layer_better_than_magnitude_and_wanda(seed, nm):
    """SparseGPT's OBS updates: relative ||W X - W' X||^2 below a half of Wanda's and magnitude's at 50 %."""
    w, x = _correlated_layer(seed)

    def err(wp):
        return float(((x @ (w - wp).T) ** 2).sum() / ((x @ w.T) ** 2).sum())

    sg = sparsegpt_prune(w, x.double().T @ x.double(), x.shape[0], 0.5, nm)
    assert float((sg == 0).float().mean()) == 0.5
    magnitude = _project(w, None, 0.5, False, nm)
    wanda = _project(w, (x**2).sum(0).reshape(1, -1).expand_as(w), 0.5, True, nm)
    # measured (seeds 0/1): unstructured 0.008/0.005 vs Wanda 0.052/0.038, magnitude 0.075/0.073;
    # 2:4 0.012/0.012 vs 0.097/0.070 and 0.117/0.130
    assert err(sg) < 0.5 * min(err(wanda), err(magnitude)), (err(sg), err(wanda), err(magnitude))


@pytest.mark.parametrize("sparsity, nm", [(0.5, None), (0.7, None), (0.5, (2, 4))])
@pytest.mark.parametrize("seed", [0, 1])
def test_alps_reconstructs_a_layer_at_least_as_well_as_sparsegpt(seed, sparsity, nm):
    """ALPS's ADMM support and CG refinement (Meng et al., 2024, Table 1): relative layer error at
    most SparseGPT's and below a tenth of magnitude pruning's, with exactly the budget kept."""
    w, x = _correlated_layer(seed)

    def err(wp):
        return float(((x @ (w - wp).T) ** 2).sum() / ((x @ w.T) ** 2).sum())

    gram = x.double().T @ x.double()
    alps = alps_prune(w, gram, sparsity, nm)
    assert int((alps != 0).sum()) == round((1 - sparsity) * w.numel())
    sg = sparsegpt_prune(w, gram, x.shape[0], sparsity, nm)
    magnitude = _project(w, None, sparsity, False, nm)
    # measured (seeds 0/1): 50 % 0.0016/0.0012 vs SparseGPT 0.0077/0.0051, magnitude 0.075/0.073;
    # 70 % 0.0058/0.0049 vs 0.066/0.024, 0.25/0.27; 2:4 0.0034/0.0029 vs 0.012/0.012, 0.12/0.13
    assert err(alps) <= err(sg), (err(alps), err(sg))
    assert err(alps) < 0.1 * err(magnitude), (err(alps), err(magnitude))


def test_alps_refinement_is_the_least_squares_optimum_on_its_support():
    """After the CG step the kept weights solve the (dampened, normalised) normal equations on the
    support: enough CG iterations give the exact restricted least-squares fix of every row."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(300, 12, generator=g, dtype=torch.float64) @ torch.randn(
        12, 12, generator=g, dtype=torch.float64
    )
    w = torch.randn(3, 12, generator=g, dtype=torch.float64)
    gram = x.T @ x
    got = alps_prune(w, gram, 0.5, cg_iter=50)
    no_cg = alps_prune(w, gram, 0.5, cg_iter=0)
    h = gram + 0.01 * torch.diagonal(gram).mean() * torch.eye(12, dtype=torch.float64)
    gaps = []
    for row in range(3):
        keep = got[row] != 0
        want = torch.linalg.solve(h[keep][:, keep], (h @ w[row])[keep])
        assert torch.allclose(got[row, keep], want, atol=1e-3)  # CG stops at a residual of 1e-4
        gaps.append(float((no_cg[row, keep] - want).abs().max()))
    assert max(gaps) > 1e-2, gaps  # the ADMM iterate alone is not the optimum


def test_sparsegpt_is_the_obs_least_squares_fix_when_one_weight_goes():
    """One row, one pruned weight (the first column): the kept weights are the damped least-squares
    optimum ``w_F + w_0 H_FF^-1 H_F0``; with white inputs (``H`` a multiple of ``I``) SparseGPT is
    magnitude pruning with no update."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 8, generator=g, dtype=torch.float64) @ torch.randn(
        8, 8, generator=g, dtype=torch.float64
    )
    w = torch.tensor([[0.01, 1.0, -2.0, 1.5, 0.7, -0.9, 1.2, 2.2]], dtype=torch.float64)
    gram = x.T @ x
    got = sparsegpt_prune(w, gram, 200, 1 / 8)
    h = 2 * gram / 200
    h = h + 0.01 * torch.diagonal(h).mean() * torch.eye(8, dtype=torch.float64)
    want = w[0, 1:] + w[0, 0] * torch.linalg.solve(h[1:, 1:], h[1:, 0])
    assert got[0, 0] == 0
    assert torch.allclose(got[0, 1:], want, atol=1e-10)
    q, _ = torch.linalg.qr(torch.randn(64, 32, generator=g, dtype=torch.float64))
    wide = torch.randn(4, 32, generator=g, dtype=torch.float64)
    white = sparsegpt_prune(wide, q.T @ q, 64, 0.5)
    magnitude = _project(wide, None, 0.5, False)
    assert torch.equal(white != 0, magnitude != 0)
    assert torch.allclose(white, magnitude, atol=1e-12)


def test_wanda_keeps_the_largest_weight_times_input_norm_per_row(tiny):
    model, calib = tiny
    block = decoder_layers(model)[0]
    seen = {}

    def keep_input(_m, inputs, _out):
        seen["a"] = inputs[0].detach()

    handle = block.mlp.down_proj.register_forward_hook(keep_input)
    with torch.no_grad():
        model(torch.as_tensor(calib), use_cache=False)
    handle.remove()
    a = seen["a"].reshape(-1, seen["a"].shape[-1])
    score = block.mlp.down_proj.weight.abs() * a.norm(dim=0)
    top = torch.topk(score, score.shape[1] - score.shape[1] // 2, dim=1).indices
    kept = torch.zeros_like(score, dtype=torch.bool).scatter_(1, top, True)
    pruned = prune_causal_lm(model, calib, method="wanda")
    got = decoder_layers(pruned)[0].mlp.down_proj.weight != 0
    assert torch.equal(got, kept)


def test_safe_obd_projects_on_the_layerwise_obd_saliency(tiny):
    """SAFE with OBD's P = diag(2 X^T X) (the reconstruction Hessian's diagonal): with no x-step, the
    final projection keeps the largest w_ij^2 ||X_j||^2 over the whole layer (Wanda's score, but not
    per row)."""
    model, calib = tiny
    block = decoder_layers(model)[0]
    seen = {}

    def keep_input(_m, inputs, _out):
        seen["a"] = inputs[0].detach()

    handle = block.mlp.down_proj.register_forward_hook(keep_input)
    with torch.no_grad():
        model(torch.as_tensor(calib), use_cache=False)
    handle.remove()
    a = seen["a"].reshape(-1, seen["a"].shape[-1])
    w = block.mlp.down_proj.weight
    score = (w**2 * (a**2).sum(0)).reshape(-1)
    kept = torch.zeros_like(score, dtype=torch.bool)
    kept[torch.topk(score, score.numel() // 2).indices] = True
    pruned = prune_causal_lm(model, calib, method="safe_obd", n_steps=0)
    got = decoder_layers(pruned)[0].mlp.down_proj.weight
    assert torch.equal(got.reshape(-1) != 0, kept)
    assert not torch.all((got != 0).float().mean(1) == 0.5)  # rows keep different shares


def test_safe_reconstructs_the_dense_block_better_than_one_shot_magnitude(tiny):
    """SAFE's x-steps lower the first block's reconstruction error below a one-shot projection."""
    model, calib = tiny
    x = torch.as_tensor(calib)

    def block0_out(m):
        seen = {}

        def keep_output(_mod, _inputs, out):
            seen["y"] = out

        h = decoder_layers(m)[0].register_forward_hook(keep_output)
        with torch.no_grad():
            m(x, use_cache=False)
        h.remove()
        y = seen["y"]
        return y[0] if isinstance(y, tuple) else y

    dense = block0_out(model)
    err = {}
    for method in ("magnitude", "safe"):
        pruned = prune_causal_lm(model, calib, method=method, n_steps=30, lr=1e-2, batch_size=16)
        err[method] = float(((block0_out(pruned) - dense) ** 2).mean())
    assert err["safe"] < 0.7 * err["magnitude"], err  # measured: 0.063 vs 0.123


def test_perplexity_is_the_exponential_of_the_mean_next_token_loss(tiny):
    model, calib = tiny
    ids = torch.as_tensor(calib)
    with torch.no_grad():
        loss = float(model(ids, labels=ids, use_cache=False).loss)
    assert lm_perplexity(model, calib, batch_size=5) == pytest.approx(math.exp(loss), rel=1e-5)


def test_bad_input_names_the_argument(tiny):
    model, calib = tiny
    with pytest.raises(ModelError, match="model"):
        prune_causal_lm(torch.nn.Linear(3, 3), calib)
    with pytest.raises(ModelError, match="model"):
        prune_causal_lm("not a model", calib)
    with pytest.raises(DataError, match="calibration"):
        prune_causal_lm(model, np.zeros((0, 12), dtype=int))
    with pytest.raises(DataError, match="calibration"):
        prune_causal_lm(model, np.full((2, 8), 0.5))
    with pytest.raises(DataError, match="calibration"):
        prune_causal_lm(model, np.full((2, 8), VOCAB))
    with pytest.raises(DataError, match="tokens"):
        lm_perplexity(model, [])
    with pytest.raises(ParameterError, match="method"):
        prune_causal_lm(model, calib, method="obs")
    for bad in ("2-4", "4:2", "0:4", "2:2", "a:b", "2:4:8", ""):
        with pytest.raises(ParameterError, match="pattern"):
            prune_causal_lm(model, calib, pattern=bad)
    with pytest.raises(ParameterError, match="pattern"):
        prune_causal_lm(model, calib, pattern=(2, 4))
    with pytest.raises(ParameterError, match=r"sparsity=0\.75"):  # 1:4 prunes 3/4, not 0.6
        prune_causal_lm(model, calib, method="sparsegpt", sparsity=0.6, pattern="1:4")
    with pytest.raises(ParameterError, match="pattern"):  # the widths are 16 and 64
        prune_causal_lm(model, calib, method="wanda", sparsity=0.8, pattern="4:20")
    with pytest.raises(ParameterError, match="damp"):
        prune_causal_lm(model, calib, method="sparsegpt", damp=0.0)


@settings(max_examples=15, deadline=None)
@given(s=st.one_of(st.floats(allow_nan=True), st.sampled_from([0, 1, 0.0, 1.0, -0.5, 2])))
def test_sparsity_outside_the_open_unit_interval_is_refused(tiny, s):
    if isinstance(s, float) and 0 < s < 1:
        return
    with pytest.raises(ParameterError, match="sparsity"):
        prune_causal_lm(tiny[0], tiny[1], sparsity=s)


@pytest.fixture(scope="module")
def english_llama():
    """A Llama of 2 blocks of width 64 trained for 300 steps on 3/4 of the pydoc topics (~1.5 min),
    128 calibration sequences of 64 tokens from its training blocks, 200 held-out blocks."""
    from trustlab.lm import encode_texts, english_corpus, train_tokenizer
    from trustlab.lm.training import TrainConfig, train_model

    texts = english_corpus()
    tok = train_tokenizer(texts[::2] + texts[1::4], vocab_size=512)
    train = encode_texts(tok, [t for i, t in enumerate(texts) if i % 4 != 3], 64)
    held = encode_texts(tok, [t for i, t in enumerate(texts) if i % 4 == 3], 64).tokens[:200]
    model = build_model(
        ModelConfig("llama", vocab_size=len(tok), d_model=64, n_layers=2, n_heads=4, max_len=64)
    )
    with one_thread():
        train_model(model, train, TrainConfig(steps=300, batch_size=32, lr=3e-3, warmup=20))
    model.eval()
    calib = train.tokens[np.random.default_rng(0).choice(len(train.tokens), 128, replace=False)]
    return model, calib, held


def _perplexities(english_llama, pattern):
    model, calib, held = english_llama
    ppl = {"dense": lm_perplexity(model, held)}
    for method in ("magnitude", "wanda", "sparsegpt", "safe_plus"):
        pruned = prune_causal_lm(model, calib, method=method, pattern=pattern, random_state=0)
        ppl[method] = lm_perplexity(pruned, held)
    return ppl


@pytest.mark.slow  # the trained Llama (~1.5 min), then SAFE+ over 2 blocks (~15 s)
@pytest.mark.claims
def test_safe_plus_beats_wanda_and_magnitude_on_held_out_perplexity(english_llama):
    """The paper's Table 1 in miniature: at 50 % unstructured sparsity, block-wise SAFE+ reaches a
    held-out perplexity at or below Wanda's and below magnitude pruning's; SparseGPT's OBS
    reconstruction is below both one-shot masks too (docs/efficiency/safe.md). The paper's SAFE+
    below SparseGPT is not reproduced here (19.62 vs 19.45), so it is not asserted."""
    ppl = _perplexities(english_llama, "unstructured")
    # measured (seed 0): dense 17.73, magnitude 20.22, Wanda 20.76, SparseGPT 19.45, SAFE+ 19.62
    assert ppl["safe_plus"] <= ppl["wanda"], ppl
    assert ppl["safe_plus"] < ppl["magnitude"] - 0.15 * (ppl["magnitude"] - ppl["dense"]), ppl
    assert ppl["sparsegpt"] < min(ppl["wanda"], ppl["magnitude"]) - 0.15 * (
        ppl["magnitude"] - ppl["dense"]
    ), ppl


@pytest.mark.slow  # the trained Llama (shared with the claim above), then SAFE+ 2:4 over 2 blocks
@pytest.mark.claims
def test_two_four_sparsity_reconstruction_beats_one_shot_masks(english_llama):
    """The paper's 2:4 rows in miniature: under 2:4 (2 of every 4 consecutive inputs kept), the
    reconstructing methods (SAFE+, SparseGPT) lose much less perplexity than Wanda and magnitude,
    and 2:4 costs more than 50 % unstructured (by > 1 here: 2.1-4.3 measured)."""
    ppl = _perplexities(english_llama, "2:4")
    # measured (seed 0): dense 17.73, magnitude 24.52, Wanda 24.24, SparseGPT 21.58, SAFE+ 21.73
    # (unstructured: 20.22, 20.76, 19.45, 19.62); SAFE+ is not below SparseGPT here either
    one_shot = min(ppl["wanda"], ppl["magnitude"])
    for method in ("safe_plus", "sparsegpt"):
        assert ppl[method] < one_shot - 0.3 * (one_shot - ppl["dense"]), ppl
    model, calib, held = english_llama
    for method in ("magnitude", "wanda", "sparsegpt"):  # one-shot: cheap to rerun unstructured
        unstructured = lm_perplexity(prune_causal_lm(model, calib, method=method), held)
        assert ppl[method] > unstructured + 1.0, (method, unstructured, ppl)


@pytest.mark.slow  # the trained Llama (shared), then SAFE+ with 300 x-steps (1-2.5 min)
@pytest.mark.claims
def test_safe_plus_beats_sparsegpt_given_300_x_steps(english_llama):
    """The paper's headline LLM result (SAFE+ below SparseGPT at 50 % and 2:4) holds here once each
    block gets 300 x-steps instead of the default 100 (at 100 it does not: claims above)."""
    model, calib, held = english_llama
    for pattern in ("unstructured", "2:4"):
        sparsegpt = lm_perplexity(prune_causal_lm(model, calib, method="sparsegpt", pattern=pattern), held)
        safe_plus = lm_perplexity(prune_causal_lm(model, calib, pattern=pattern, n_steps=300), held)
        # measured (seed 0): 50 % 19.23 vs 19.45; 2:4 20.79 vs 21.58 (dense 17.73)
        assert safe_plus < sparsegpt - 0.1, (pattern, safe_plus, sparsegpt)


@pytest.mark.slow  # the trained Llama (shared), then one-shot ALPS and SparseGPT (~1 s each)
@pytest.mark.claims
def test_alps_beats_sparsegpt_on_held_out_perplexity(english_llama):
    """The ALPS baseline of the paper's Table 1: ADMM with its rho schedule and the CG refinement
    reaches a lower held-out perplexity than SparseGPT at 50 % and 2:4 (ALPS's own claim); at this
    scale it is also below SAFE+ (the paper's SAFE+ < ALPS does not reproduce: docs/efficiency/safe.md)."""
    model, calib, held = english_llama
    for pattern in ("unstructured", "2:4"):
        ppl = {
            method: lm_perplexity(prune_causal_lm(model, calib, method=method, pattern=pattern), held)
            for method in ("alps", "sparsegpt")
        }
        # measured (seeds 0/1): 50 % 18.82/18.81 vs 19.45/19.43; 2:4 20.24/20.21 vs 21.58/21.39
        assert ppl["alps"] < ppl["sparsegpt"] - 0.3, (pattern, ppl)
