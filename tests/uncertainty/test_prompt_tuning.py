"""CoOp / KgCoOp / DOR prompt tuning on the lab's tiny CLIP (docs/uncertainty/dor.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError, TrustlabError  # noqa: E402
from trustlab.uncertainty.calibration import expected_calibration_error  # noqa: E402
from trustlab.uncertainty.prompt_tuning import (  # noqa: E402
    DualEncoder,
    PromptTuner,
    text_feature_divergence,
    top_label_calibration,
    zero_shot_proba,
)
from trustlab.vision.classifiers import one_thread  # noqa: E402
from trustlab.vision.tiny_clip import (  # noqa: E402
    TinyClipRecipe,
    digit_task,
    outlier_vocabulary,
    tiny_clip,
)

CTX = "a photo of the digit"


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    with one_thread():
        yield


@pytest.fixture(scope="module")
def model() -> Any:
    return tiny_clip()


@pytest.fixture(scope="module")
def task() -> Any:
    return digit_task(shots=4, n_draws=1, random_state=0)


def _tuner(model: Any, task: Any, **kw: Any) -> PromptTuner:
    kw.setdefault("outlier_words", outlier_vocabulary(task.base_names))
    return PromptTuner(model, ctx_init=CTX, random_state=0, **kw)


def test_shipped_model_is_a_calibrated_zero_shot_classifier(model: Any, task: Any) -> None:
    p = zero_shot_proba(model, task.X_new, task.new_names, template=CTX + " {}")
    cal = top_label_calibration(task.y_new, p)
    # 269 new-class images: accuracy well above chance (0.2) and the ECE within ~3 standard errors
    # of the ECE of a perfectly calibrated model of this accuracy (about 0.025 at n = 269)
    assert cal.n == 269 and cal.accuracy > 0.75
    assert cal.ece < 3 * np.sqrt(cal.accuracy * (1 - cal.accuracy) / cal.n) + 0.025


def test_dual_encoder_of_callables_equals_the_module(model: Any, task: Any) -> None:
    enc = DualEncoder(
        lambda x: model.image_encoder(x),
        lambda ids: model.token_embedding(ids),
        lambda e, i: model.text_encoder(e, i),
        model.tokenize,
        model.logit_scale,
    )
    a = zero_shot_proba(enc, task.X_new[:20], task.new_names, template=CTX + " {}")
    b = zero_shot_proba(model, task.X_new[:20], task.new_names, template=CTX + " {}")
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_initial_context_is_the_hand_written_prompt(model: Any, task: Any) -> None:
    # one step at a negligible learning rate: the spliced context equals the prompt's embeddings
    tuner = _tuner(model, task, method="coop", n_steps=1, lr=1e-9)
    tuner.fit(task.X_shots, task.y_shots, class_names=task.base_names)
    assert tuner.context_.shape == (5, 64)
    zs = zero_shot_proba(model, task.X_new, task.new_names, template=CTX + " {}")
    np.testing.assert_allclose(tuner.predict_proba(task.X_new, task.new_names), zs, atol=1e-5)
    assert tuner.predict(task.X_base).shape == (task.X_base.shape[0],)


def test_dor_pool_is_ranked_and_excludes_the_base_classes(model: Any, task: Any) -> None:
    tuner = _tuner(model, task, method="dor", n_steps=1, outlier_top_k=7)
    tuner.fit(task.X_shots, task.y_shots, class_names=task.base_names)
    pool = tuner.outlier_pool_
    assert len(pool) == 7 and not set(pool) & set(task.base_names)
    words = outlier_vocabulary(task.base_names)
    feats = PromptTuner(model, method="coop", ctx_init=CTX, n_steps=1, lr=1e-9).fit(
        task.X_shots, task.y_shots, class_names=task.base_names
    )
    base = feats.text_features()
    scores = (feats.text_features(words) @ base.T).mean(1)
    assert pool == [words[i] for i in np.argsort(-scores, kind="stable")[:7]]
    # a base class name passed as an outlier is dropped (the paper's "non-overlapping")
    again = _tuner(model, task, method="dor", n_steps=1, outlier_words=["zero", "seven"])
    assert again.fit(task.X_shots, task.y_shots, class_names=task.base_names).outlier_pool_ == ["seven"]


@pytest.mark.claims
def test_dor_keeps_new_label_features_near_zero_shot(model: Any, task: Any) -> None:
    """The mechanism: DOR limits the drift of labels outside the task, CoOp does not."""
    zs = _tuner(model, task, method="coop", n_steps=1, lr=1e-9).fit(
        task.X_shots, task.y_shots, class_names=task.base_names
    )
    ref = zs.text_features(task.new_names)
    drift = {}
    for method in ("coop", "dor"):
        tuner = _tuner(model, task, method=method, n_steps=20, lr=0.05)
        tuner.fit(task.X_shots, task.y_shots, class_names=task.base_names)
        drift[method] = float(1 - (tuner.text_features(task.new_names) * ref).sum(1).mean())
    assert drift["dor"] < 0.25 * drift["coop"]  # measured: 0.002 vs 0.06 (1 - mean cosine)


def test_outliers_are_redrawn_every_step(model: Any, task: Any) -> None:
    seen: list[list[str]] = []

    def tokenize(texts: Any) -> Any:
        seen.append(list(texts))
        return model.tokenize(texts)

    enc = DualEncoder(
        model.image_encoder, model.token_embedding, model.text_encoder, tokenize, model.logit_scale
    )
    words = outlier_vocabulary(task.base_names)
    PromptTuner(enc, ctx_init=CTX, n_steps=6, n_outliers=3, outlier_words=words, random_state=0).fit(
        task.X_shots, task.y_shots, class_names=task.base_names
    )
    draws = [tuple(b) for b in seen if len(b) == 3]
    assert len(draws) == 6 and len(set(draws)) == 6  # a fresh batch of outlier prompts each step


def test_a_users_own_embedding_bag_dual_encoder() -> None:
    vocab = {w: i for i, w in enumerate("<s> <e> a photo of cat dog cow hen".split())}
    gen = torch.Generator().manual_seed(0)
    emb = torch.nn.Embedding(len(vocab), 8)
    proj = torch.nn.Linear(8, 4)
    image = torch.nn.Linear(6, 4)
    with torch.no_grad():
        for p in (*emb.parameters(), *proj.parameters(), *image.parameters()):
            p.copy_(torch.randn(p.shape, generator=gen))

    def tokenize(texts: Any) -> tuple[np.ndarray, np.ndarray]:
        rows = [[0, *(vocab[w] for w in t.split()), 1] for t in texts]
        return np.array(rows), np.array([len(r) - 1 for r in rows])

    enc = DualEncoder(image, emb, lambda e, eot: proj(e.mean(1)), tokenize, 10.0)
    X = np.random.default_rng(0).normal(size=(12, 6))
    y = np.arange(12) % 2
    tuner = PromptTuner(enc, method="kgcoop", n_steps=5, ctx_init="a photo of").fit(
        X, y, class_names=["cat", "dog"]
    )
    assert tuner.context_.shape == (3, 8)
    p = tuner.predict_proba(X, class_names=["cow", "hen", "cat"])
    assert p.shape == (12, 3) and np.allclose(p.sum(1), 1)
    bounded = DualEncoder(image, emb, lambda e, eot: proj(e.mean(1)), tokenize, 10.0, pixel_range=(-1.0, 1.0))
    with pytest.raises(DataError, match=r"Scale the images") as err:  # Gaussian features leave [-1, 1]
        PromptTuner(bounded, n_steps=1, ctx_init="a photo of").fit(X, y, class_names=["cat", "dog"])
    assert err.value.argument == "X"


def test_top_label_calibration_reuses_trustlab_ece() -> None:
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=200)
    y = rng.integers(4, size=200)
    cal = top_label_calibration(y, p)
    assert cal.ece == expected_calibration_error((p.argmax(1) == y).astype(float), p.max(1))
    assert cal.accuracy == np.mean(p.argmax(1) == y) and cal.n == 200


@settings(max_examples=8, deadline=None, derandomize=True)
@given(st.integers(2, 6), st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_top_label_calibration_is_bounded(k: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cal = top_label_calibration(rng.integers(k, size=n), rng.dirichlet(np.ones(k), size=n))
    assert 0.0 <= cal.ece <= 1.0 and 1.0 / k - 1e-12 <= cal.confidence <= 1.0


def test_text_feature_divergence_values() -> None:
    assert text_feature_divergence([[1, 0], [0, 1]], n_neighbors=1) == pytest.approx(np.sqrt(2))
    # three unit vectors at 120 degrees: each is sqrt(3) from both others
    a = np.array([[np.cos(t), np.sin(t)] for t in (0, 2 * np.pi / 3, 4 * np.pi / 3)])
    assert text_feature_divergence(3 * a, n_neighbors=5) == pytest.approx(np.sqrt(3))


def test_trained_recipe_is_cached(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import trustlab.vision.tiny_clip as lab

    calls = []

    def untrained(r: Any) -> Any:  # the cache's logic, without the training (tested slow below)
        calls.append(r)
        return lab._build(len(lab._vocabulary()), r.width, r.embed_dim, r.seed)

    monkeypatch.setattr(lab, "train_tiny_clip", untrained)
    recipe = TinyClipRecipe(steps=2, n_shapes=12, batch_size=16)
    first = tiny_clip(recipe, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("tiny-clip-*.npz"))) == 1
    again = tiny_clip(recipe, cache_dir=tmp_path)
    for (k, v), w in zip(first.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(v, w), k
    assert calls == [recipe]  # trained once, then read from the cache


@pytest.mark.slow  # retrains the shipped tiny CLIP: 1,000 contrastive steps, about a minute of CPU
def test_shipped_weights_are_what_the_default_recipe_trains(model: Any) -> None:
    from trustlab.vision.tiny_clip import train_tiny_clip

    fresh = train_tiny_clip()
    for k, v in model.state_dict().items():
        w = fresh.state_dict()[k].to(torch.float16).to(torch.float32)
        np.testing.assert_allclose(v.numpy(), w.numpy(), rtol=1e-2, atol=1e-3, err_msg=k)


def test_kgcoop_plus_dor_is_the_sum_of_the_two_penalties(model: Any, task: Any) -> None:
    # KgCoOp + DOR (the paper's Table 1 combination): each weight at 0 leaves the other tuner exactly
    def ctx(**kw: Any) -> np.ndarray:
        return (
            _tuner(model, task, n_steps=3, lr=0.05, **kw)
            .fit(task.X_shots, task.y_shots, class_names=task.base_names)
            .context_
        )

    np.testing.assert_allclose(ctx(method="kgcoop+dor", kgcoop_weight=0.0), ctx(method="dor"), atol=1e-6)
    np.testing.assert_allclose(
        ctx(method="kgcoop+dor", reg_weight=0.0, kgcoop_weight=8.0), ctx(method="kgcoop"), atol=1e-6
    )
    assert not np.allclose(ctx(method="kgcoop+dor"), ctx(method="dor"), atol=1e-4)


def test_zero_shot_anchor_is_zs_template_not_the_context_words(model: Any, task: Any) -> None:
    # the regularisers hold the tuned features to the hand-written prompt's (KgCoOp's anchor), which
    # need not be the words the context starts from: the pool is ranked with zs_template's features
    def pool(ctx_init: str, zs_template: Any) -> list[str]:
        tuner = PromptTuner(
            model,
            ctx_init=ctx_init,
            zs_template=zs_template,
            n_steps=1,
            outlier_top_k=7,
            outlier_words=outlier_vocabulary(task.base_names),
        )
        return tuner.fit(task.X_shots, task.y_shots, class_names=task.base_names).outlier_pool_

    weak = "apple river cloud table"
    assert pool(weak, CTX + " {}") == pool(CTX, None)
    assert pool(weak, None) != pool(CTX, None)


# ---- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        ({"X": "nan"}, "X"),
        ({"X": "flat"}, "X"),
        ({"X": "8-bit"}, "X"),
        ({"y": "range"}, "y"),
        ({"y": "short"}, "y"),
        ({"class_names": "zero"}, "class_names"),
        ({"class_names": ["zero", "zero"]}, "class_names"),
        ({"class_names": ["zero", "one", "two", "three", "elephant"]}, "class_names"),
        ({"method": "maple"}, "method"),
        ({"outlier_words": None}, "outlier_words"),
        ({"outlier_words": ["zero"]}, "outlier_words"),
        ({"outlier_words": ["elephant"]}, "outlier_words"),
        ({"n_steps": 0}, "n_steps"),
        ({"lr": -1.0}, "lr"),
        ({"reg_weight": -1.0}, "reg_weight"),
        ({"kgcoop_weight": -1.0}, "kgcoop_weight"),
        ({"zs_template": "a photo of the digit"}, "zs_template"),
        ({"n_threads": 0}, "n_threads"),
        ({"ctx_init": ""}, "ctx_init"),
        ({"model": "clip"}, "model"),
    ],
)
def test_bad_fit_input(model: Any, task: Any, change: dict, argument: str) -> None:
    X, y, names = task.X_shots, task.y_shots, list(task.base_names)
    kw: dict[str, Any] = {
        "method": "dor",
        "n_steps": 1,
        "outlier_words": outlier_vocabulary(names),
        "ctx_init": CTX,
    }
    m: Any = model
    for key, value in change.items():
        if key == "X":
            X = X.copy()
            if value == "nan":
                X[0, 0, 0, 0] = np.nan
            elif value == "8-bit":
                X = X * 255.0  # the tiny CLIP reads [0, 1] (its pixel_range)
            else:
                X = X.reshape(len(X), 4, 16)  # the tower's Linear(64) still fits: use a wrong width
                X = X[:, :, :5]
        elif key == "y":
            y = y + 10 if value == "range" else y[:3]
        elif key == "class_names":
            names = value
        elif key == "model":
            m = value
        else:
            kw[key] = value
    with pytest.raises(TrustlabError) as err:
        PromptTuner(m, **kw).fit(X, y, class_names=names)
    assert err.value.argument == argument


def test_bad_other_input(model: Any, task: Any) -> None:
    with pytest.raises(ParameterError) as err:
        zero_shot_proba(model, task.X_new, task.new_names, template="a photo of the digit")
    assert err.value.argument == "template"
    with pytest.raises(NotFittedError):
        PromptTuner(model).predict_proba(task.X_new)
    with pytest.raises(DataError) as err2:
        top_label_calibration([0, 1], [[0.5, 0.6], [0.2, 0.8]])
    assert err2.value.argument == "proba"
    with pytest.raises(DataError):
        top_label_calibration([0, 2], [[0.5, 0.5], [0.2, 0.8]])
    with pytest.raises(DataError):
        text_feature_divergence([[0.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ModelError) as err3:
        zero_shot_proba(
            DualEncoder(model.image_encoder, model.token_embedding, model.text_encoder, model.tokenize, -1.0),
            task.X_new,
            task.new_names,
        )
    assert err3.value.argument == "model"
    with pytest.raises(ParameterError):
        digit_task(base=(0, 1), new=(1, 2))
    with pytest.raises(ParameterError) as err4:
        digit_task(corner_mark=1.5)
    assert err4.value.argument == "corner_mark"
    with pytest.raises(ParameterError):
        tiny_clip("default")  # type: ignore[arg-type]


# ---- the paper's claim, at small scale ------------------------------------------------------------


@pytest.mark.claims
@pytest.mark.slow  # 6 seeds x 3 tuners x 300 steps of the text transformer: ~40 s of CPU
def test_coop_overconfident_on_new_classes_and_dor_fixes_it(model: Any) -> None:
    """CoOp raises new-class ECE over zero-shot; DOR lowers it versus CoOp; base accuracy comparable.

    Six seeds (shots, test noise, outliers); 1,076 new-class test images per seed (538 digits x
    2 noise draws... see digit_task). The standard error of one ECE estimate is at most
    sqrt(0.25 / n); a mean over 6 seeds of a difference of two has standard error at most
    sqrt(2 * 0.25 / n / 6), and each comparison asks for 2 of them.
    """
    seeds = range(6)
    ece: dict[str, list[float]] = {"zs": [], "coop": [], "dor": []}
    base_acc: dict[str, list[float]] = {"coop": [], "dor": []}
    n = 0
    for seed in seeds:
        t = digit_task(shots=4, n_draws=4, random_state=seed)
        n = len(t.y_new)
        zs = zero_shot_proba(model, t.X_new, t.new_names, template=CTX + " {}")
        ece["zs"].append(top_label_calibration(t.y_new, zs).ece)
        for method in ("coop", "dor"):
            tuner = PromptTuner(
                model,
                method=method,
                ctx_init=CTX,
                n_steps=300,
                lr=0.05,
                random_state=seed,
                outlier_words=outlier_vocabulary(t.base_names),
            )
            tuner.fit(t.X_shots, t.y_shots, class_names=t.base_names)
            ece[method].append(top_label_calibration(t.y_new, tuner.predict_proba(t.X_new, t.new_names)).ece)
            base_acc[method].append(top_label_calibration(t.y_base, tuner.predict_proba(t.X_base)).accuracy)
    tol = 2 * np.sqrt(2 * 0.25 / n / len(seeds))
    mean = {k: float(np.mean(v)) for k, v in ece.items()}
    assert mean["coop"] - mean["zs"] > tol, mean
    assert mean["coop"] - mean["dor"] > tol, mean
    assert np.mean(base_acc["dor"]) > np.mean(base_acc["coop"]) - tol


@pytest.mark.claims
@pytest.mark.slow  # 12 seeds x 3 tuners x 200 steps on 80 shots: ~30 s of CPU (56 s on a loaded machine)
def test_at_16_shots_dor_ece_is_at_or_below_the_better_baseline_on_base_and_new_classes(model: Any) -> None:
    """The issue's bar in one setting: DOR's base and new ECE at or below min(CoOp, KgCoOp).

    The paper's 16 shots per base class, the lab's prompt (the model's own template, as CLIP's
    "a photo of a"; zero-shot calibrated on both sides: ECE 0.024 and 0.024), the paper's
    ``lambda = 8``. 12 seeds (shots, test noise, outliers); 1,084 base and 1,076 new test images
    per seed. Measured (means over seeds): base ECE CoOp 0.024, KgCoOp 0.024, DOR 0.016; new ECE
    CoOp 0.035, KgCoOp 0.024, DOR 0.022. Base: DOR below each baseline beyond 2.5 standard errors
    of the paired per-seed differences (measured 3.3). New: DOR below CoOp beyond 3 standard
    errors and not above KgCoOp (measured -0.0027 +- 0.0010). Not the paper's mechanism for the
    base side: CoOp gains no base accuracy over zero-shot here (0.860 vs 0.874).
    """
    ece: dict[str, list[tuple[float, float]]] = {"coop": [], "kgcoop": [], "dor": []}
    for seed in range(12):
        t = digit_task(shots=16, n_draws=4, random_state=seed)
        for method in ece:
            tuner = PromptTuner(
                model,
                method=method,
                ctx_init=CTX,
                n_steps=200,
                lr=0.02,
                random_state=seed,
                outlier_words=outlier_vocabulary(t.base_names),
            )
            tuner.fit(t.X_shots, t.y_shots, class_names=t.base_names)
            base = top_label_calibration(t.y_base, tuner.predict_proba(t.X_base)).ece
            new = top_label_calibration(t.y_new, tuner.predict_proba(t.X_new, t.new_names)).ece
            ece[method].append((base, new))
    e = {k: np.array(v) for k, v in ece.items()}

    def below(a: np.ndarray, b: np.ndarray, n_se: float) -> bool:  # mean(a - b) < -n_se standard errors
        d = a - b
        return bool(d.mean() < -n_se * d.std(ddof=1) / np.sqrt(len(d)))

    assert below(e["dor"][:, 0], e["coop"][:, 0], 2.5) and below(e["dor"][:, 0], e["kgcoop"][:, 0], 2.5)
    assert below(e["dor"][:, 1], e["coop"][:, 1], 3.0)
    assert below(e["dor"][:, 1], e["kgcoop"][:, 1], 0.0)


@pytest.mark.claims
@pytest.mark.slow  # 12 seeds x 3 tuners x 200 steps on 80 shots: ~35 s of CPU (62 s on a loaded machine)
def test_with_a_downstream_artefact_dor_keeps_coops_base_gain_and_zero_shot_new_class_ece(model: Any) -> None:
    """The paper's setting in small: tuning gains base accuracy from a zero-shot calibrated on both sides.

    Every image carries a corner mark (brightness +0.6 on the top-left 3x3 pixels) the tiny CLIP
    never saw: zero-shot base accuracy 0.825 at confidence 0.836, new 0.799 at 0.798. 16 shots,
    the lab's prompt, ``lambda = 8``, 12 seeds, 542 base and 538 new test images per seed.
    Measured: base accuracy zero-shot 0.825, CoOp 0.851, KgCoOp 0.841, DOR 0.852; new-class ECE
    0.032, 0.061, 0.030, 0.033; base ECE 0.030, 0.041, 0.028, 0.034. Each comparison is asserted
    beyond 3 standard errors of the paired per-seed differences (2 for DOR's base ECE below CoOp's:
    measured 2.7), and a difference asserted absent is within 3 times the sampling floor
    sqrt(0.25 / n / 12). Not asserted (not reproduced): DOR's base ECE at or below KgCoOp's
    (+0.006 +- 0.004).
    """
    keys = ("zs", "coop", "kgcoop", "dor")
    r: dict[str, list[tuple[float, float, float]]] = {k: [] for k in keys}  # base acc, base ECE, new ECE
    n = 0
    for seed in range(12):
        t = digit_task(shots=16, n_draws=2, corner_mark=0.6, random_state=seed)
        n = len(t.y_new)
        zb = top_label_calibration(
            t.y_base, zero_shot_proba(model, t.X_base, t.base_names, template=CTX + " {}")
        )
        zn = top_label_calibration(
            t.y_new, zero_shot_proba(model, t.X_new, t.new_names, template=CTX + " {}")
        )
        r["zs"].append((zb.accuracy, zb.ece, zn.ece))
        for method in keys[1:]:
            tuner = PromptTuner(
                model,
                method=method,
                ctx_init=CTX,
                n_steps=200,
                lr=0.02,
                random_state=seed,
                outlier_words=outlier_vocabulary(t.base_names),
            )
            tuner.fit(t.X_shots, t.y_shots, class_names=t.base_names)
            b = top_label_calibration(t.y_base, tuner.predict_proba(t.X_base))
            nn = top_label_calibration(t.y_new, tuner.predict_proba(t.X_new, t.new_names))
            r[method].append((b.accuracy, b.ece, nn.ece))
    a = {k: np.array(v) for k, v in r.items()}
    floor = 3 * np.sqrt(0.25 / n / 12)

    def above(x: np.ndarray, y: np.ndarray, n_se: float = 3.0) -> bool:
        d = x - y
        return bool(d.mean() > n_se * d.std(ddof=1) / np.sqrt(len(d)))

    assert above(a["coop"][:, 0], a["zs"][:, 0])  # tuning gains base accuracy (0.825 -> 0.851)
    assert above(a["coop"][:, 2], a["zs"][:, 2])  # CoOp over-confident on new classes (0.032 -> 0.061)
    assert above(a["coop"][:, 2], a["dor"][:, 2])  # DOR brings it back (0.033)
    assert abs(np.mean(a["dor"][:, 2] - a["zs"][:, 2])) < floor
    assert above(a["dor"][:, 0], a["kgcoop"][:, 0])  # DOR keeps more base accuracy than KgCoOp
    assert np.mean(a["dor"][:, 0] - a["coop"][:, 0]) > -floor  # ... all of CoOp's
    assert above(a["coop"][:, 1], a["dor"][:, 1], 2.0)  # base ECE below CoOp's (0.034 vs 0.041)


WEAK_CTX = "apple river cloud table"  # four words no pre-training caption used: a poor hand-written prompt


def _weak_prompt_base_classes(
    model: Any, reg_weight: float, seeds: range
) -> tuple[dict[str, np.ndarray], int]:
    """(accuracy, confidence, ECE) on the base classes per seed: zero-shot, KgCoOp, DOR (16 shots)."""
    rows: dict[str, list[tuple[float, float, float]]] = {"zs": [], "kgcoop": [], "dor": []}
    n = 0
    for seed in seeds:
        t = digit_task(shots=16, n_draws=4, random_state=seed)
        n = len(t.y_base)
        zs = top_label_calibration(
            t.y_base, zero_shot_proba(model, t.X_base, t.base_names, template=WEAK_CTX + " {}")
        )
        rows["zs"].append((zs.accuracy, zs.confidence, zs.ece))
        for method in ("kgcoop", "dor"):
            tuner = PromptTuner(
                model,
                method=method,
                ctx_init=WEAK_CTX,
                reg_weight=reg_weight,
                n_steps=200,
                lr=0.02,
                random_state=seed,
                outlier_words=outlier_vocabulary(t.base_names),
            )
            tuner.fit(t.X_shots, t.y_shots, class_names=t.base_names)
            cal = top_label_calibration(t.y_base, tuner.predict_proba(t.X_base))
            rows[method].append((cal.accuracy, cal.confidence, cal.ece))
    return {k: np.array(v) for k, v in rows.items()}, n


def _beyond_3se(diff: np.ndarray, floor: float) -> bool:
    return bool(diff.mean() > max(3 * diff.std(ddof=1) / np.sqrt(len(diff)), floor))


@pytest.mark.claims
@pytest.mark.slow  # 12 seeds x 2 tuners x 200 steps on 80 shots: ~20 s of CPU (66 s on a loaded machine)
def test_kgcoop_underconfident_on_base_classes_and_dor_keeps_the_base_gain(model: Any) -> None:
    """The base-class side: where tuning gains base accuracy, KgCoOp's confidence stays behind.

    A setting where zero-shot is weak on the base classes (the prompt's four words were never in a
    caption: base accuracy 0.69, calibrated) and 16 shots (the paper's), at the paper's
    ``lambda = 8``. KgCoOp gains accuracy but keeps the zero-shot confidence level, so it is
    under-confident on the base classes (the paper's abstract); DOR, which leaves the base labels
    free, keeps more of the gain and a lower base ECE. Each comparison is asserted beyond 3
    standard errors of its per-seed values over 12 seeds (shots, test noise and outliers drawn per
    seed), and beyond 3 times the sampling floor sqrt(0.25 / n / 12) of a mean of per-seed
    accuracies (n = 1,084 base-class test images). Not asserted: DOR's base ECE stays above
    CoOp's here (0.064 vs 0.019; docs/uncertainty/dor.md).
    """
    r, n = _weak_prompt_base_classes(model, 8.0, range(12))
    floor = 3 * np.sqrt(0.25 / n / 12)
    # tuning helps the base classes here: DOR gains over zero-shot (measured 0.687 -> 0.861)
    assert _beyond_3se(r["dor"][:, 0] - r["zs"][:, 0], floor)
    # KgCoOp: accuracy above its confidence (measured 0.807 vs 0.715), zero-shot calibrated (0.687 vs 0.692)
    assert _beyond_3se(r["kgcoop"][:, 0] - r["kgcoop"][:, 1], floor)
    assert abs(np.mean(r["zs"][:, 0] - r["zs"][:, 1])) < floor
    # DOR keeps more base accuracy than KgCoOp (0.861 vs 0.807) at a lower base ECE (0.064 vs 0.092)
    assert _beyond_3se(r["dor"][:, 0] - r["kgcoop"][:, 0], floor)
    assert _beyond_3se(r["kgcoop"][:, 2] - r["dor"][:, 2], floor)


@pytest.mark.claims
@pytest.mark.slow  # as above: ~20 s of CPU
def test_at_a_lower_equal_weight_dor_is_better_calibrated_on_base_classes_than_kgcoop(model: Any) -> None:
    """Both regularisers at ``lambda = 0.5``: same base accuracy, KgCoOp under-confident, DOR less so.

    The weak-prompt setting of the test above with the weight lowered for both tuners (the paper's 8
    holds DOR's context near the weak prompt's collapsed features, docs/uncertainty/dor.md).
    Measured over 12 seeds: base accuracy 0.866 (KgCoOp) and 0.867 (DOR); confidence 0.821 and
    0.851; base ECE 0.048 and 0.026 (CoOp's: 0.019), lower for DOR in all 12 seeds. Tolerances
    as above.
    """
    r, n = _weak_prompt_base_classes(model, 0.5, range(12))
    floor = 3 * np.sqrt(0.25 / n / 12)
    assert abs(np.mean(r["dor"][:, 0] - r["kgcoop"][:, 0])) < floor  # the same accuracy gain
    assert _beyond_3se(r["kgcoop"][:, 0] - r["kgcoop"][:, 1], floor)  # KgCoOp under-confident
    assert _beyond_3se(r["kgcoop"][:, 2] - r["dor"][:, 2], floor)  # DOR's base ECE lower
    # DOR's confidence follows its accuracy more closely than KgCoOp's
    assert _beyond_3se(r["dor"][:, 1] - r["kgcoop"][:, 1], floor)
