"""Row 002-17: SAE probes vs baselines (Kantamneni et al., ICML 2025) on planted activations.

One small TopK SAE (16 latents, k = 2; the Llama Scope architecture of the paper) is trained once
in a module fixture on unlabelled planted hierarchical activations (about 0.3 s CPU). The target
is one planted parent feature, so the raw activations carry it linearly.

Claim tolerances: per regime, the gain of the SAE side over the baseline side is averaged over
the cells (values x seeds) and compared with 3 standard errors of that mean (paired cells).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.explain.probing import (
    TopMeanDifference,
    _folds,
    _regime_split,
    compare_probes,
    default_regime_values,
    summarize_probes,
)
from trustlab.explain.sae import SparseAutoencoder
from trustlab.explain.sae_data import make_hierarchical_activations

N_SAE = 2000


@pytest.fixture(scope="module")
def world():
    import torch

    data = make_hierarchical_activations(4000, magnitude_std=0.5, noise=0.1, random_state=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is fastest on shared cores
    try:
        sae = SparseAutoencoder(
            16, architecture="topk", k=2, batch_size=256, n_steps=150, learning_rate=1e-2, random_state=0
        ).fit(data.X[:N_SAE])
    finally:
        torch.set_num_threads(threads)
    X, y = data.X[N_SAE:], data.features[N_SAE:, 0] > 0
    return data, sae, X, y, rotated_shift(data)


def rotated_shift(data, n=600, angle=np.pi / 4):
    """Covariate shift like the paper's (translation, renamed entities): the same features, but the
    target concept's direction turns by ``angle`` at test time, away from what was learned."""
    test = make_hierarchical_activations(n, magnitude_std=0.5, noise=0.1, random_state=1)
    rng = np.random.default_rng(2)
    D = data.directions.copy()
    u = rng.normal(size=D.shape[1])
    u -= D.T @ (D @ u)
    D[0] = np.cos(angle) * D[0] + np.sin(angle) * u / np.linalg.norm(u)
    X = test.features @ D + 0.1 * rng.normal(size=(n, D.shape[1]))
    return SimpleNamespace(X=X, features=test.features)


def test_paper_grids() -> None:
    scarcity = default_regime_values("scarcity")
    assert scarcity[0] == 2 and scarcity[-1] == 1024 and len(scarcity) <= 20
    assert len(default_regime_values("imbalance")) == 19 and default_regime_values("imbalance")[0] == 0.05
    assert default_regime_values("noise") == [round(v, 4) for v in np.linspace(0, 0.5, 11)]


def test_top_mean_difference_keeps_the_planted_column() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    Z = np.c_[rng.random((200, 3)), 3 * y + rng.random(200), rng.random(200)]
    assert TopMeanDifference(k=1).fit(Z, y).columns_.tolist() == [3]
    assert TopMeanDifference(k=50).fit(Z, y).transform(Z).shape == (200, 5)


def test_validation_strategy_follows_table_4() -> None:
    y = np.tile([0, 1], 150)
    assert len(_folds(y[:3], 0)) == 1 and _folds(y[:3], 0)[0][0].tolist() == [0, 1, 2]  # train AUC
    assert [len(va) for _, va in _folds(y[:10], 0)] == [2] * 5  # leave-two-out
    assert len(_folds(y[:60], 0)) == 6
    (tr, va), *rest = _folds(y[:300], 0)
    assert not rest and len(va) == 60 and len(tr) == 240


def test_regime_draws() -> None:
    rng = np.random.default_rng(0)
    y = (np.arange(1000) % 4 == 0).astype(int)
    pool, test = np.arange(800), np.arange(800, 1000)
    train, labels, t = _regime_split("scarcity", 2, y, pool, test, 1024, rng)
    assert sorted(labels.tolist()) == [0, 1] and t is test
    train, labels, t = _regime_split("imbalance", 0.1, y, pool, test, 500, rng)
    assert len(train) == 500 and labels.mean() == pytest.approx(0.1)
    assert y[t].mean() == pytest.approx(0.1, abs=0.01)
    train, labels, _ = _regime_split("noise", 0.3, y, pool, test, 400, rng)
    assert (labels != y[train]).mean() == pytest.approx(0.3)


def test_table_and_quiver_pick_the_best_validation_arm(world) -> None:
    _, sae, X, y, _ = world
    t = compare_probes(X, y, sae, regimes={"noise": [0.1]}, methods=["logreg", "knn"], sae_ks=[4],
                       n_hparams=3, n_train=256)  # fmt: skip
    assert t["method"].tolist() == ["logreg", "knn", "sae_k4", "quiver_baselines", "quiver_with_sae"]
    arms = t[t["family"] != "quiver"]
    best = arms.loc[arms["val_auc"].idxmax()]
    quiver = t.set_index("method").loc["quiver_with_sae"]
    assert quiver["val_auc"] == best["val_auc"] and quiver["test_auc"] == best["test_auc"]
    assert (t["n_train"] == 256).all() and t["test_auc"].between(0.5, 1).all()
    summary = summarize_probes(t)
    gain = t.set_index("method").loc["sae_k4", "test_auc"] - t.set_index("method").loc["logreg", "test_auc"]
    assert summary["mean_gain"].iloc[0] == pytest.approx(gain)  # noise: head to head


def _gains(table: pd.DataFrame) -> pd.DataFrame:
    return (
        summarize_probes(table, by_value=False)
        .set_index("regime")
        .rename(columns={"mean_gain": "mean", "se_gain": "se"})
    )


def _claim(world, methods, regimes, n_seeds, n_hparams, sae, oracle_regimes, sae_ks=(1, 4)):
    data, _, X, y, shifted = world
    kw = dict(methods=methods, X_shift=shifted.X, y_shift=shifted.features[:, 0] > 0, n_seeds=n_seeds,
              n_train=256, n_hparams=n_hparams)  # fmt: skip
    real = _gains(compare_probes(X, y, sae, regimes=regimes, sae_ks=sae_ks, **kw))
    assert (real["mean"] <= 3 * real["se"] + 1e-9).all(), real
    # power check: an "SAE" whose latent is the true (noise-free) target feature must win by more
    # than 3 standard errors, so the comparison can detect an SAE that helps
    truth = {len(X): data.features[N_SAE:], len(shifted.X): shifted.features}
    oracle_plan = {r: regimes[r] for r in oracle_regimes}
    kw["n_seeds"] = 2 * n_seeds
    oracle = _gains(compare_probes(X, y, lambda A: truth[len(A)], regimes=oracle_plan, sae_ks=[1], **kw))
    assert (oracle["mean"] > 3 * oracle["se"]).all(), oracle
    return real, oracle


@pytest.mark.claims
def test_claim_sae_probes_do_not_beat_baselines(world) -> None:
    regimes = {"scarcity": [8], "noise": [0.3], "shift": [0]}
    _claim(world, ["logreg"], regimes, n_seeds=3, n_hparams=3, sae=world[1], oracle_regimes=["shift"],
           sae_ks=[4])  # fmt: skip


@pytest.mark.claims
@pytest.mark.slow  # three baselines, all four regimes, five seeds, three SAEs: minutes of CPU
@pytest.mark.parametrize("architecture", ["topk", "batchtopk", "matryoshka"])
def test_claim_sae_probes_do_not_beat_baselines_full(world, architecture) -> None:
    sae = world[1]
    if architecture != "topk":
        sae = SparseAutoencoder(16, architecture=architecture, k=2, batch_size=256, n_steps=150,
                                learning_rate=1e-2, random_state=0).fit(world[0].X[:N_SAE])  # fmt: skip
    regimes = {"scarcity": [4, 16, 64], "imbalance": [0.1, 0.9], "noise": [0.2, 0.4], "shift": [0]}
    _claim(world, ["logreg", "pca", "knn"], regimes, n_seeds=5, n_hparams=5, sae=sae,
           oracle_regimes=["shift"])  # fmt: skip


BAD = [
    (dict(X=np.full((20, 3), np.nan)), DataError, "X"),
    (dict(y=np.zeros(40)), DataError, "y"),
    (dict(y=np.r_[np.ones(5), np.zeros(35)]), DataError, "y"),  # 1 positive in the test split
    (dict(encode="sae"), ParameterError, "encode"),
    (dict(encode=lambda A: A[:5]), ParameterError, "encode"),
    (dict(regimes=["drift"]), ParameterError, "regimes"),
    (dict(regimes={"noise": [0.7]}), ParameterError, "regimes"),
    (dict(regimes={"scarcity": [1]}), ParameterError, "regimes"),
    (dict(regimes={"imbalance": [1.0]}), ParameterError, "regimes"),
    (dict(regimes=["shift"]), ParameterError, "X_shift"),
    (dict(regimes=["shift"], X_shift=np.ones((5, 2)), y_shift=[0, 1, 0, 1, 0]), DataError, "X_shift"),
    (dict(methods=["svm"]), ParameterError, "methods"),
    (dict(sae_ks=[0]), ParameterError, "sae_ks"),
    (dict(sae_ks=[1.5]), ParameterError, "sae_ks"),
    (dict(n_seeds=0), ParameterError, "n_seeds"),
    (dict(test_size=0.9), ParameterError, "test_size"),
]


@pytest.mark.parametrize(("kwargs", "error", "argument"), BAD)
def test_bad_input_names_the_argument(kwargs, error, argument) -> None:
    rng = np.random.default_rng(0)
    args = dict(X=rng.normal(size=(40, 3)), y=np.tile([0, 1], 20), encode=np.abs)
    args.update(kwargs)
    with pytest.raises(error) as info:
        compare_probes(args.pop("X"), args.pop("y"), args.pop("encode"), **args)
    assert isinstance(info.value, TrustlabError) and info.value.argument == argument


def test_summary_needs_sae_rows() -> None:
    rng = np.random.default_rng(0)
    t = compare_probes(rng.normal(size=(40, 3)), np.tile([0, 1], 20), None, regimes={"noise": [0.0]},
                       methods=["logreg"], n_hparams=2)  # fmt: skip
    assert set(t["family"]) == {"baseline", "quiver"}
    with pytest.raises(ParameterError, match="no SAE probes"):
        summarize_probes(t)
    with pytest.raises(ParameterError) as info:
        summarize_probes(pd.DataFrame({"a": [1]}))
    assert info.value.argument == "table"


def test_quiver_ties_go_to_the_sae_probe() -> None:
    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 60)
    X = np.c_[4.0 * y - 2 + 0.1 * rng.normal(size=120), rng.normal(size=(120, 2))]  # separable
    t = compare_probes(X, y, lambda A: A, regimes={"standard": [0]}, methods=["logreg"], sae_ks=[1],
                       n_hparams=2)  # fmt: skip
    rows = t.set_index("method")
    assert rows.loc["logreg", "val_auc"] == rows.loc["sae_k1", "val_auc"] == 1.0
    assert rows.loc["quiver_with_sae", "hparams"] == "sae_k1"
    assert rows.loc["quiver_baselines", "hparams"] == "logreg"


@settings(max_examples=15, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not 0 <= v <= 0.5))
def test_noise_fraction_outside_paper_range_is_refused(fraction) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ParameterError) as info:
        compare_probes(rng.normal(size=(40, 3)), np.tile([0, 1], 20), None, regimes={"noise": [fraction]})
    assert info.value.argument == "regimes"


# ------------------------------------------------------------------ CLI
CLI_SETTINGS = ["--sae-k", "2", "--regimes", "scarcity=16,noise=0.2", "--methods", "logreg,knn",
                "--seeds", "2", "--train", "64", "--hparams", "2", "--latents", "16", "--active", "2",
                "--steps", "40", "--lr", "1e-2"]  # fmt: skip


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    data = make_hierarchical_activations(300, magnitude_std=0.5, noise=0.1, random_state=0)
    root = tmp_path_factory.mktemp("probe")
    y = (data.features[:, 0] > 0).astype(int)
    np.save(root / "X.npy", data.X)
    np.save(root / "y.npy", y)
    return root, data.X, y


def test_cli_explain_probe_matches_the_library(cli_files) -> None:
    import json

    import torch
    from typer.testing import CliRunner

    from trustlab.cli import app

    root, X, y = cli_files
    runner = CliRunner()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = runner.invoke(app, ["explain", "probe", str(root / "X.npy"), str(root / "y.npy"), *CLI_SETTINGS,
                                  "--json"])  # fmt: skip
        assert res.exit_code == 0, res.output
        got = json.loads(res.stdout)
        sae = SparseAutoencoder(16, architecture="topk", k=2, batch_size=300, n_steps=40, learning_rate=1e-2,
                                random_state=0).fit(X)  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    table = compare_probes(X, y, sae, regimes={"scarcity": [16], "noise": [0.2]}, methods=["logreg", "knn"],
                           sae_ks=[2], n_seeds=2, n_train=64, n_hparams=2)  # fmt: skip
    want = summarize_probes(table, by_value=False).set_index("regime")
    assert [r["regime"] for r in got["summary"]] == ["noise", "scarcity"]
    for r in got["summary"]:
        assert r["n_cells"] == 2 and r["mean_gain"] == pytest.approx(want.loc[r["regime"], "mean_gain"])
        assert r["win_rate"] == want.loc[r["regime"], "win_rate"]
    assert got["summary"][0]["compared"] == "sae_k2 vs logreg" and got["summary"][1]["compared"] == "quiver"
    assert set(got["mean_test_auc"]) == {"logreg", "knn", "sae_k2"}
    assert got["mean_test_auc"]["logreg"] > 0.75  # the planted feature is linear in X
    assert got["rows"] == 300 and got["sae"]["trained_on_rows"] == 300
    # the table: a header, one line per regime, the mean AUCs; baselines only with --no-sae
    res = runner.invoke(app, ["explain", "probe", str(root / "X.npy"), str(root / "y.npy"), "--no-sae",
                              *CLI_SETTINGS[2:8], "--hparams", "1"])  # fmt: skip
    lines = res.stdout.splitlines()
    assert res.exit_code == 0 and lines[0].startswith("mean test AUC: logreg 0."), res.output
    assert "knn" in lines[0] and "sae" not in lines[0] and "baselines only; 300 rows x 20 dims" in lines[1]


def test_cli_explain_probe_bad_input_is_one_line(cli_files) -> None:
    from typer.testing import CliRunner

    from trustlab.cli import app

    root, X, y = cli_files
    np.save(root / "flat.npy", X[:, 0])
    np.save(root / "nan.npy", np.where(np.arange(X.size).reshape(X.shape) == 7, np.nan, X))
    np.save(root / "three.npy", np.arange(300) % 3)
    np.save(root / "one.npy", np.ones(300, dtype=int))  # a target with one value
    np.save(root / "short.npy", y[:-1])
    np.save(root / "rare.npy", (np.arange(300) < 5).astype(int))  # one positive in the test split
    (root / "y.csv").write_text("label\n" + "\n".join(map(str, y)) + "\n")
    good = [str(root / "X.npy"), str(root / "y.npy")]
    runner = CliRunner()
    for args, flag in [
        ([str(root / "missing.npy"), good[1]], "ACTIVATIONS"),
        ([str(root / "flat.npy"), good[1]], "ACTIVATIONS"),
        ([str(root / "nan.npy"), good[1]], "ACTIVATIONS"),
        ([good[0], str(root / "missing.csv")], "LABELS"),
        ([good[0], str(root / "three.npy")], "LABELS"),
        ([good[0], str(root / "one.npy")], "LABELS"),
        ([good[0], str(root / "short.npy")], "LABELS"),
        ([good[0], str(root / "rare.npy")], "LABELS"),
        ([*good, "--regimes", "drift"], "--regimes"),
        ([*good, "--regimes", "noise=a"], "--regimes"),
        ([*good, "--regimes", "shift"], "--regimes"),
        ([*good, "--methods", "svm"], "--methods"),
        ([*good, "--methods", "knn", "--regimes", "noise"], "--methods"),
        ([*good, "--sae-k", "x"], "--sae-k"),
        ([*good, "--latents", "4", "--active", "8"], "--active"),
        ([*good, "--latents", "0"], "--latents"),
        ([*good, "--no-sae", "--seeds", "0"], "--seeds"),
    ]:
        res = runner.invoke(app, ["explain", "probe", *args])
        lines = res.stderr.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"error ({flag})"), (
            args,
            res.output,
        )
    from trustlab._cli_explain import _load_labels

    assert _load_labels(root / "y.csv", 300, "labels").tolist() == y.tolist()  # header line dropped


def test_cli_command_of_the_docs_page_runs(cli_files) -> None:
    """The page's command (its flags, on the planted files) runs; tiny overrides keep it fast."""
    import re
    import shlex
    from pathlib import Path

    import torch
    from typer.testing import CliRunner

    from trustlab.cli import app

    root, _, _ = cli_files
    page = Path(__file__).resolve().parents[2] / "docs" / "explain" / "sae-probing.md"
    command = re.search(r"```bash\n(trustlab explain probe .*?)```", page.read_text(), re.S).group(1)
    args = shlex.split(command.replace("\\\n", " "))[1:]
    files = {"acts.npy": "X.npy", "labels.csv": "y.npy", "unlabelled.npy": "X.npy"}
    args = [str(root / files[a]) if a in files else a for a in args]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = CliRunner().invoke(app, [*args, "--steps", "20", "--seeds", "1", "--hparams", "1", "--regimes",
                                       "noise=0.3", "--methods", "logreg"])  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[1].startswith("noise      sae_k4 vs logreg       1")
