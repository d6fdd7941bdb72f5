"""trustlab.lm.mib_causal: MIB's causal-variable track (featurizers aligned to a variable, IIA per site)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.lm._mib_featurizers import Interchange
from trustlab.lm.mib_causal import (
    CausalModel,
    CounterfactualPairs,
    causal_variable_localization,
    second_value_causal_model,
    sorting_causal_model,
    sorting_pairs,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: extra threads only contend

VOCAB, WIDTH = 6, 16


@pytest.fixture(scope="module")
def identity_model():
    """A 1-block Llama whose blocks write nothing: the residual stream is the token embedding, the
    last token's identity lives in coordinates 0..5 (4 * one-hot), coordinates 8..15 hold noise the
    unembedding ignores, so the answer at the last position is the last token."""
    from trustlab.lm import ModelConfig, build_model

    torch.manual_seed(0)
    m = build_model(ModelConfig("llama", vocab_size=VOCAB, d_model=WIDTH, n_layers=1, n_heads=2, max_len=8))
    with torch.no_grad():
        for layer in m.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = torch.zeros(VOCAB, WIDTH)
        emb[:, :VOCAB] = 4 * torch.eye(VOCAB)
        emb[:, 8:] = torch.randn(VOCAB, WIDTH - 8)
        m.model.embed_tokens.weight.copy_(emb)
        head = torch.zeros(VOCAB, WIDTH)
        head[:, :VOCAB] = torch.eye(VOCAB)
        m.lm_head.weight.copy_(head)
    return m.eval()


def _last_token_pairs(n: int, seed: int) -> CounterfactualPairs:
    rng = np.random.default_rng(seed)
    b, c = rng.integers(0, VOCAB, (n, 3)), rng.integers(0, VOCAB, (n, 3))
    c[:, -1] = (b[:, -1] + rng.integers(1, VOCAB, n)) % VOCAB
    return CounterfactualPairs(b, c, c[:, -1], b[:, -1], c[:, -1], variable="last")


def test_variable_in_known_coordinates_is_found_by_das_and_dbm_not_by_a_random_subspace(
    identity_model,
) -> None:
    res = causal_variable_localization(
        identity_model,
        _last_token_pairs(48, 0),
        _last_token_pairs(48, 1),
        methods=["full", "das", "dbm", "random"],
        layers=[1],
        das_dim=VOCAB,
        epochs=10,
    )
    iia = dict(zip(res.methods, res.iia[:, 0], strict=True))
    assert iia["full"] == 1.0 and iia["das"] == 1.0 and iia["dbm"] == 1.0
    assert iia["random"] < 0.75  # a random 6-dim subspace of 16 holds about 6/16 of the variable's energy
    n_feat = dict(zip(res.methods, res.n_features[:, 0], strict=True))
    assert n_feat["das"] == VOCAB and n_feat["full"] == WIDTH and VOCAB <= n_feat["dbm"] < WIDTH
    assert res.to_frame().shape == (4, 5) and set(res.best()) == set(res.methods)


def test_interchange_module_moves_exactly_its_features() -> None:
    gen = torch.Generator().manual_seed(0)
    diff = torch.randn(5, 8, generator=gen, dtype=torch.float64)
    das = Interchange("das", 8, 8, 3, None, gen)
    r = das.rows().detach()
    torch.testing.assert_close(r @ r.T, torch.eye(3, dtype=torch.float64))  # orthonormal rows
    torch.testing.assert_close(das(diff).detach(), diff @ r.T @ r)  # the projection of the change
    dbm = Interchange("dbm", 8, 8, 3, None, gen).eval()
    with torch.no_grad():
        dbm.mask.copy_(torch.tensor([1.0, -1, 2, -3, 0.5, -0.1, 0, 4], dtype=torch.float64))
    keep = torch.tensor([1.0, 0, 1, 0, 1, 0, 0, 1], dtype=torch.float64)
    torch.testing.assert_close(dbm(diff), diff * keep)  # sigmoid(mask) > 0.5 at evaluation
    assert dbm.n_selected(8) == 4
    dbm.train()
    dbm.temperature = 0.5
    torch.testing.assert_close(dbm(diff), diff * torch.sigmoid(dbm.mask / 0.5))
    decoder = torch.randn(4, 8, generator=gen, dtype=torch.float64)
    sae = Interchange("dbm-sae", 4, 8, 3, decoder, gen).eval()
    with torch.no_grad():
        sae.mask.copy_(torch.tensor([1.0, -1, -1, 1], dtype=torch.float64))
    df = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(sae(df), (df * torch.tensor([1.0, 0, 0, 1], dtype=torch.float64)) @ decoder)


def test_causal_model_interchange_and_sorting_pairs() -> None:
    cm = sorting_causal_model(4)
    base, cf = (
        {"x0": [5, 2], "x1": [1, 9], "x2": [7, 3], "x3": [8, 4]},
        {"x0": [0, 6], "x1": [3, 5], "x2": [2, 1], "x3": [9, 8]},
    )
    assert cm.interchange(base, cf, "min").tolist() == [0, 1]
    assert cm.interchange(base, cf, "argmin").tolist() == [5, 3]  # base's value at cf's argmin
    for variable in ("min", "argmin"):
        p = sorting_pairs(40, variable=variable, n_items=4, n_values=9, seed=2)
        assert len(p) == 40 and p.base.shape == (40, 5) and (p.base[:, -1] == 9).all()
        assert (p.labels != p.base_labels).all()  # a null intervention scores 0
        assert (p.cf_labels == p.counterfactual[:, :4].min(1)).all()
    assert len(p.subset(np.arange(40) < 10)) == 10
    sec = second_value_causal_model(3)
    assert (
        sec.interchange({"x0": [4], "x1": [1], "x2": [7]}, {"x0": [9], "x1": [5], "x2": [8]}, "first")[0] == 7
    )
    p = sorting_pairs(30, variable="first", n_items=4, n_values=9, seed=3)
    assert (
        p.base.shape == (30, 6) and (p.base[:, 5] == p.base[:, :4].min(1)).all() and (p.base[:, 4] == 9).all()
    )
    assert ((p.labels != p.base_labels) & (p.labels != p.cf_labels)).all()  # null and copy-all both fail
    second = np.sort(p.base[:, :4], axis=1)[:, 1]
    assert (p.base_labels == second).all()


def test_bad_inputs_raise_trustlab_errors(identity_model) -> None:
    good = _last_token_pairs(8, 0)
    cases = [
        ({"methods": ["das", "sae"]}, ParameterError),
        ({"methods": []}, ParameterError),
        ({"layers": [5]}, ParameterError),
        ({"temperature": (1.0, 0.0)}, ParameterError),
        ({"das_dim": 0}, ParameterError),
        ({"sae": "x", "methods": ["dbm-sae"]}, ParameterError),
    ]
    for kwargs, err in cases:
        with pytest.raises(err):
            causal_variable_localization(identity_model, good, good, **kwargs)
    with pytest.raises(ParameterError, match="CounterfactualPairs"):
        causal_variable_localization(identity_model, "pairs", good)
    far = CounterfactualPairs(
        good.base + 10, good.counterfactual, good.labels, good.base_labels, good.cf_labels
    )
    with pytest.raises(DataError, match="vocabulary"):
        causal_variable_localization(identity_model, far, good)
    wrong = CounterfactualPairs(
        good.base, good.counterfactual, good.labels, (good.base_labels + 1) % VOCAB, good.cf_labels
    )
    with pytest.raises(DataError, match="correctly"):
        causal_variable_localization(identity_model, wrong, good)
    with pytest.raises(DataError):
        CounterfactualPairs(
            good.base, good.counterfactual[:, :2], good.labels, good.base_labels, good.cf_labels
        )
    with pytest.raises(DataError):
        CounterfactualPairs(good.base, good.counterfactual, good.labels[:3], good.base_labels, good.cf_labels)
    with pytest.raises(TrustlabError):
        sorting_pairs(4, variable="max")
    with pytest.raises(ParameterError):
        CausalModel(("a",), {"s": (("b",), np.negative)}, "s")
    with pytest.raises(ParameterError):
        sorting_causal_model(3).interchange(
            {"x0": [1], "x1": [2], "x2": [3]}, {"x0": [1], "x1": [2], "x2": [3]}, "y"
        )


@pytest.mark.claims
@pytest.mark.slow  # five featurizers at three sites for three variables, an SAE per site: ~45 s CPU
def test_claim_das_highest_iia_sae_not_better_than_neurons_controls_at_chance(sorting_model) -> None:
    model = sorting_model[0]
    res = causal_variable_localization(model, sorting_pairs(256, seed=0), sorting_pairs(256, seed=1))
    best, mean = res.best(), res.mean()
    assert res.n_test >= 200  # the model answers (nearly) every pair: SE of an IIA near 1 is < 0.01
    # MIB: supervised DAS reaches the highest IIA (here within 0.03, ~3 SE, of the best featurizer,
    # moving a quarter of the vector's dimensions where DBM moves most neurons)
    assert best["das"] >= max(best.values()) - 0.03
    j = int(np.argmax(res.iia[res.methods.index("das")]))
    assert res.n_features[res.methods.index("das"), j] < res.n_features[res.methods.index("dbm"), j]
    # MIB: SAE features are not better than neurons
    assert best["dbm-sae"] <= best["dbm"] + 0.03 and mean["dbm-sae"] <= mean["dbm"] + 0.03
    # controls: the block-0 input at SEP is the same token for every input (IIA 0 for all featurizers),
    # a random subspace of DAS's size stays near chance (1/12; measured 0.108 on 249 pairs, SE 0.02)
    assert (res.iia[:, 0] == 0).all()
    assert best["random"] <= 0.15 and best["das"] - best["random"] > 0.8
    # a variable the model does not compute: the argmin pointer (the answer from the base's value at the
    # counterfactual's argmin) is not at the answer position for any featurizer
    ptr = causal_variable_localization(
        model, sorting_pairs(256, variable="argmin", seed=0), sorting_pairs(256, variable="argmin", seed=1)
    )
    assert max(ptr.best().values()) <= 1 / 12 and best["das"] - max(ptr.best().values()) > 0.8
    # a site holding more than the variable: after block 0, at the emitted first value, the threshold
    # ("first") shares the vector with what block 0 gathered for the second value. Moving the whole
    # vector answers the counterfactual's second value (IIA ~0, as MIB's full-vector baseline loses);
    # DAS is the best featurizer there (within 0.05, ~1.5 SE at ~220 pairs: DBM over PCA ties it) and
    # above DBM on neurons; SAE latents are not better than neurons.
    sec = causal_variable_localization(
        model, sorting_pairs(256, variable="first", seed=0), sorting_pairs(256, variable="first", seed=1)
    )
    site1 = dict(zip(sec.methods, sec.iia[:, 1], strict=True))
    assert sec.n_test >= 180 and site1["full"] <= 0.05
    assert site1["das"] >= max(site1.values()) - 0.05 and site1["das"] >= site1["dbm"] + 0.05
    assert site1["dbm-sae"] <= site1["dbm"] + 0.05 and site1["das"] - site1["random"] > 0.1


@pytest.mark.claims
@pytest.mark.slow  # trains a 3-block Llama (100 steps), six featurizers at four sites: ~40 s CPU
def test_claim_mib_ordering_on_a_deeper_model_slow() -> None:
    from trustlab.lm import ModelConfig, TrainConfig, build_model, sorting_task, train_model

    model = build_model(ModelConfig("llama", vocab_size=13, d_model=32, n_layers=3, n_heads=4, max_len=32))
    train_model(model, sorting_task(2000, 6, n_values=12), TrainConfig(steps=100, lr=1e-2, warmup=5))
    res = causal_variable_localization(
        model, sorting_pairs(256, variable="first", seed=0), sorting_pairs(256, variable="first", seed=1)
    )
    site1 = dict(zip(res.methods, res.iia[:, 1], strict=True))  # measured: das 0.323, dbm 0.239,
    mean = res.mean()  # dbm-pca 0.187, dbm-sae 0.100, random 0.072, full 0.000 on 251 pairs (SE <= 0.03)
    assert res.n_test >= 200 and site1["full"] <= 0.05
    assert site1["das"] >= max(site1.values()) - 0.02 and mean["das"] >= max(mean.values()) - 0.02
    assert site1["dbm-sae"] <= site1["dbm"] + 0.02 and mean["dbm-sae"] <= mean["dbm"] + 0.02
    assert site1["das"] - site1["random"] > 0.15


def test_cli_variable_prints_best_iia_and_rejects_bad_input(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from trustlab.cli import app

    runner = CliRunner()
    out = tmp_path / "iia.json"
    args = [
        "lm",
        "variable",
        "micro-llama-sorting",
        "--methods",
        "full,random",
        "--n",
        "48",
        "--out",
        str(out),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "variable min, best IIA over 3 sites: full 1.000; random" in res.output
    rows = json.loads(out.read_text())
    assert len(rows) == 6 and {r["method"] for r in rows} == {"full", "random"}
    res = runner.invoke(app, [*args[:4], "full", "--n", "48", "--heads", "0.1,1.0"])
    assert res.exit_code == 0 and "best IIA over 2 sites: full" in res.output, res.output
    for bad in (
        ["--variable", "max"],
        ["--methods", "das,pca"],
        ["--n", "1"],
        ["--heads", "x"],
        ["--heads", "9.9"],
    ):
        res = runner.invoke(app, ["lm", "variable", "micro-llama-sorting", *bad])
        assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    res = runner.invoke(app, ["lm", "variable", "tiny-llama-lcg"])
    assert res.exit_code == 2 and "sorting" in res.output
