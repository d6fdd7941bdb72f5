"""Sum-of-Parts on token ids and attention masks (row 002-18, text): ``SumOfPartsTokens``.

Fast tests use 1-layer BERT and Llama sequence classifiers built from configs; the claim test
fine-tunes the lab LM ``small-llama-english`` (pydoc text, trained into the cache on first use)
on real pydoc sentences with a planted two-token span.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trustlab._threads import one_thread  # noqa: E402
from trustlab.errors import DataError, ModelError, NotFittedError, TrustlabError  # noqa: E402
from trustlab.explain.sop_tokens import SumOfPartsTokens, TokenBackbone  # noqa: E402
from trustlab.explain.sop_tokens_faithfulness import (  # noqa: E402
    sop_insertion_over_k,
    token_gradient_x_input,
    token_insertion_deletion,
    token_occlusion,
)


def _bert(seed: int = 0) -> object:
    cfg = transformers.BertConfig(
        vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return transformers.BertForSequenceClassification(cfg).eval()


def _llama(seed: int = 0) -> object:
    cfg = transformers.LlamaConfig(
        vocab_size=30, hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, pad_token_id=0, max_position_embeddings=32,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return transformers.LlamaForSequenceClassification(cfg).eval()


def _batch(n: int = 12, T: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 30, size=(n, T))
    lengths = rng.integers(3, T + 1, size=n)
    mask = (np.arange(T)[None] < lengths[:, None]).astype(int)
    return ids * mask, mask, (ids[:, 0] > 15).astype(int)


def test_embedding_hook_is_the_authors_masking() -> None:
    """A masked token gets the mask token's word embedding; ids, positions and attention stay."""
    bert = _bert()
    ids, mask, _ = _batch()
    keep = np.random.default_rng(1).integers(0, 2, size=ids.shape)
    bb = TokenBackbone(bert, None, mask_token_id=0)
    with torch.no_grad():
        z, feats = bb.run(torch.as_tensor(ids), torch.as_tensor(mask), torch.as_tensor(keep))
        emb = bert.get_input_embeddings()(torch.as_tensor(ids))
        k = torch.as_tensor(keep, dtype=emb.dtype).unsqueeze(-1)
        emb = emb * k + bert.get_input_embeddings().weight[0] * (1 - k)
        ref = bert(
            inputs_embeds=emb,
            attention_mask=torch.as_tensor(mask),
            token_type_ids=torch.zeros_like(torch.as_tensor(ids)),
        )
        pooled = bert.bert(inputs_embeds=emb, attention_mask=torch.as_tensor(mask)).pooler_output
    np.testing.assert_allclose(z.numpy(), ref.logits.numpy(), atol=1e-5)
    np.testing.assert_allclose(feats.numpy(), pooled.numpy(), atol=1e-5)  # the classifier's input


def test_groups_are_real_tokens_and_scores_add_up_on_bert_and_llama() -> None:
    ids, mask, y = _batch()
    with one_thread():
        for name, net in (("bert", _bert()), ("llama", _llama())):
            sop = SumOfPartsTokens(net, n_groups=3, n_epochs=1, batch_size=6).fit(ids, y, attention_mask=mask)
            e = sop.explain(ids, attention_mask=mask)
            assert e.masks.shape == (12, 3, 8) and not (e.masks & (mask[:, None] == 0)).any()
            sizes = np.maximum(1, (mask.sum(1) * 0.2).astype(int))
            assert (e.masks.sum(-1) == sizes[:, None]).all()  # k = 20% of each text's real tokens
            np.testing.assert_allclose(e.group_scores.sum(1), e.logits, atol=1e-5)
            assert sop.predict(ids, attention_mask=mask).shape == (12,)
            if name == "bert":  # (HF decoders pool at the last id != pad_token_id: padding ids matter)
                # padding does not matter to SOP: the same texts padded with other ids predict the same
                other = np.where(mask > 0, ids, 7)
                z = sop.decision_function(other, attention_mask=mask)
                np.testing.assert_allclose(z, e.logits, atol=1e-5)
    # a decoder head scores every position: the selector's keys are the pooled position's inputs
    bb = TokenBackbone(_llama(), None, 0)
    with torch.no_grad():
        z, feats = bb.run(torch.as_tensor(ids), torch.as_tensor(mask))
        np.testing.assert_allclose(bb.head(feats).numpy(), z.numpy(), atol=1e-5)


def test_token_metrics_and_varying_k() -> None:
    ids, mask, y = _batch()
    bert = _bert()
    with one_thread():
        occ = token_occlusion(bert, ids, attention_mask=mask)
        gxi = token_gradient_x_input(bert, ids, attention_mask=mask)
        assert occ.shape == gxi.shape == ids.shape and not occ[mask == 0].any() and not gxi[mask == 0].any()
        r = token_insertion_deletion(bert, ids, occ, attention_mask=mask)
        assert r.insertion_curve.shape == (12, 10)
        np.testing.assert_allclose(r.insertion_curve[:, -1], r.deletion_curve[:, -1])  # k = 1: full text
        sop = SumOfPartsTokens(bert, n_groups=3, n_epochs=1).fit(ids, y, attention_mask=mask)
        k = sop_insertion_over_k(sop, ids, attention_mask=mask, fractions=[0.2, 1.0])
        np.testing.assert_allclose(k.insertion_curve[:, -1], k.deletion_curve[:, -1])  # k = 1: same groups
        assert (k.insertion_curve_current >= 0.5 - 1e-12).all()  # the class predicted at that k
        full = sop.predict_proba(ids, attention_mask=mask)
        # at the fitted k = 0.2 the varying-k curve is SOP itself
        np.testing.assert_allclose(k.insertion_curve[:, 0], full[np.arange(12), full.argmax(1)], atol=1e-6)


def test_bad_inputs_raise_trustlab_errors() -> None:
    ids, mask, y = _batch()
    bert = _bert()
    with pytest.raises(DataError, match="attention_mask"):
        SumOfPartsTokens(bert, n_epochs=1).fit(ids, y, attention_mask=mask[:, :-1])
    with pytest.raises(DataError, match="input_ids"):
        SumOfPartsTokens(bert, n_epochs=1).fit(np.zeros((0, 5), int), [])
    with pytest.raises(DataError, match="input_ids"):
        SumOfPartsTokens(bert, n_epochs=1).fit(np.zeros((4, 0), int), [0, 1, 0, 1])
    empty = mask.copy()
    empty[0] = 0
    with pytest.raises(DataError, match="empty text"):
        SumOfPartsTokens(bert, n_epochs=1).fit(ids, y, attention_mask=empty)
    with pytest.raises(DataError, match="0/1"):
        SumOfPartsTokens(bert, n_epochs=1).fit(ids, y, attention_mask=mask * 2)
    with pytest.raises(DataError, match="vocabulary"):
        SumOfPartsTokens(bert, n_epochs=1).fit(ids + 100, y)
    with pytest.raises(DataError, match="y"):
        SumOfPartsTokens(bert, n_epochs=1).fit(ids, y[:-1])
    with pytest.raises(DataError, match="y holds class"):
        SumOfPartsTokens(bert, n_epochs=1).fit(ids, y * 5)
    with pytest.raises(DataError, match="single class"):
        SumOfPartsTokens(bert, n_epochs=1).fit(ids, np.zeros(len(y), dtype=int))
    with pytest.raises(ModelError, match="backbone"):
        SumOfPartsTokens(torch.nn.Linear(3, 2), n_epochs=1).fit(ids, y)
    with pytest.raises(DataError, match="mask_token_id"):
        SumOfPartsTokens(bert, mask_token_id=99, n_epochs=1).fit(ids, y)
    with pytest.raises(NotFittedError):
        SumOfPartsTokens(bert).predict(ids)
    lm = transformers.LlamaForCausalLM(_llama().config)
    with pytest.raises(ModelError, match="sequence"):
        SumOfPartsTokens(lm, n_epochs=1).fit(ids, y, attention_mask=mask)
    sop = SumOfPartsTokens(bert, n_groups=2, n_epochs=1).fit(ids, y, attention_mask=mask)
    with pytest.raises(DataError, match="tokens per text"):
        sop.predict(ids[:, :5])
    with pytest.raises(DataError, match="keep"):
        sop.decision_function(ids, attention_mask=mask, keep=np.zeros_like(ids))
    with pytest.raises(DataError, match="attributions"):
        token_insertion_deletion(bert, ids, np.zeros((12, 3)))
    with pytest.raises(DataError, match="fractions"):
        token_insertion_deletion(bert, ids, np.zeros(ids.shape), fractions=[0.0, 1.5])
    with pytest.raises(TrustlabError, match="target"):
        token_occlusion(bert, ids, target=5)


PAIR = (409, 649)  # " not", " defined" in small-llama-english's tokenizer


def _planted_pair(n: int, T: int, tok: object, seed: int) -> tuple[np.ndarray, ...]:
    """Real pydoc sentences (first T tokens) with " not" and " defined" planted in each: label 1
    when they are adjacent ("not defined"), 0 when they are apart. Neither token alone says the
    label; the evidence is the pair."""
    from trustlab.explain.probing_tokens import _paragraphs

    pool = []
    for _, _, text in _paragraphs():
        s = list(tok.encode(text))[:T]  # type: ignore[attr-defined]
        if len(s) >= 12 and not set(s) & {*PAIR, 0}:
            pool.append(s)
    rng = np.random.default_rng(seed)
    ids, mask, span = np.zeros((n, T), np.int64), np.zeros((n, T), np.int64), np.zeros((n, T), np.int64)
    y = (rng.random(n) < 0.5).astype(np.int64)
    for i, j in enumerate(rng.integers(0, len(pool), n)):
        s = list(pool[j])
        if y[i]:
            p = int(rng.integers(0, len(s) - 1))
            a, b = p, p + 1
        else:
            while True:
                a, b = (int(v) for v in rng.choice(len(s), 2, replace=False))
                if b != a + 1:
                    break
        s[a], s[b] = PAIR
        span[i, [a, b]] = 1
        ids[i, : len(s)], mask[i, : len(s)] = s, 1
    return ids, mask, y, span


def _top2_is_span(A: np.ndarray, mask: np.ndarray, span: np.ndarray) -> np.ndarray:
    top = np.argsort(-np.where(mask > 0, A, -np.inf), axis=1, kind="stable")[:, :2]
    return np.array([set(top[i]) == set(np.flatnonzero(span[i])) for i in range(len(A))], float)


@pytest.mark.slow  # ~3 CPU minutes: fine-tunes the lab LM (600 steps) and SOP (3 epochs)
@pytest.mark.claims
def test_claim_on_real_text_sop_loses_accuracy_and_is_not_more_faithful_than_occlusion() -> None:
    """small-llama-english fully fine-tuned as a classifier (LMSequenceClassifier, last-token
    head; the head-only default leaves this backbone at chance, 0.475) on pydoc sentences with a
    planted "not defined" pair; SOP wraps it with token-id groups.

    Measured (seed 0; 800 train / 400 test texts; maps on 100 texts): backbone 1.000, SOP 0.675
    (3 epochs, lr 1e-2; 0.65-0.68 at 6 epochs, another seed or lr 3e-2); group scores sum to the
    logit (2e-7). The paper's claims do not reproduce here: SOP loses a third of the accuracy,
    and occlusion on the backbone puts the pair on top in 50% of texts (96% of adjacent pairs)
    vs SOP 7%; insertion / deletion (authors' text metric) occlusion 0.994 / 0.446, SOP's own
    map on SOP 0.694 / 0.514, SOP rerun over k 0.688 / 0.358. SOP's map still ranks tokens
    better than chance (random on SOP 0.645 / 0.631)."""
    from trustlab.explain.sop_purity import region_purity, top_feature_region
    from trustlab.lm import TrainConfig, load_shipped
    from trustlab.security.backdoor_complications import LMSequenceClassifier

    model, tok, _ = load_shipped("small-llama-english")
    ids, mask, y, span = _planted_pair(1200, 24, tok, seed=0)
    tr, te = slice(0, 800), slice(800, 1200)
    with one_thread():
        clf = LMSequenceClassifier(
            model, pad_id=0, finetune="full", train=TrainConfig(steps=600, batch_size=32, lr=1e-3)
        )
        clf.fit(ids[tr], y[tr])
        sop = SumOfPartsTokens(clf, n_epochs=3, learning_rate=1e-2, random_state=0)
        sop.fit(ids[tr], y[tr], attention_mask=mask[tr])
        acc_b = float(np.mean(clf.predict(ids[te]) == y[te]))
        acc_s = float(np.mean(sop.predict(ids[te], attention_mask=mask[te]) == y[te]))
        m = slice(800, 900)
        e = sop.explain(ids[m], attention_mask=mask[m])
        fa = e.feature_attributions()
        occ = token_occlusion(clf, ids[m], attention_mask=mask[m])
        f_sop = token_insertion_deletion(sop, ids[m], fa, attention_mask=mask[m])
        f_occ = token_insertion_deletion(clf, ids[m], occ, attention_mask=mask[m])
        rand = np.random.default_rng(1).random(fa.shape)
        f_rand = token_insertion_deletion(sop, ids[m], rand, attention_mask=mask[m])
        over_k = sop_insertion_over_k(sop, ids[m], attention_mask=mask[m])
    se = lambda p, n: np.sqrt(max(p * (1 - p), 1 / n) / n)  # noqa: E731
    paired = lambda d: d.mean() > 3 * d.std(ddof=1) / np.sqrt(len(d))  # noqa: E731
    assert acc_b > 0.97
    np.testing.assert_allclose(e.group_scores.sum(1), e.logits, atol=1e-5)  # faithful by construction
    # SOP learns the task (above chance) but keeps far less than the backbone's accuracy
    assert acc_s > 0.5 + 3 * se(0.5, 400), acc_s
    assert acc_b - acc_s > 3 * np.hypot(se(acc_s, 400), se(acc_b, 400)), (acc_b, acc_s)
    # SOP's map and SOP over k rank tokens better than chance on SOP itself ...
    assert paired((f_sop.insertion - f_sop.deletion) - (f_rand.insertion - f_rand.deletion))
    assert paired(over_k.insertion - over_k.deletion)
    iou_sop = region_purity(top_feature_region(np.where(mask[m] > 0, fa, -1e9)), span[m]).iou
    iou_rand = region_purity(top_feature_region(np.where(mask[m] > 0, rand, -1e9)), span[m]).iou
    assert paired(iou_sop - iou_rand)
    # ... but occlusion on the backbone is more faithful and finds the pair more often (not reproduced)
    assert paired(f_occ.insertion - np.maximum(f_sop.insertion, over_k.insertion))
    # (deletion: SOP 0.514 vs occlusion 0.446, within 3 paired SEs: no claim either way)
    hit_sop, hit_occ = _top2_is_span(fa, mask[m], span[m]), _top2_is_span(occ, mask[m], span[m])
    assert paired(hit_occ - hit_sop), (hit_occ.mean(), hit_sop.mean())


def _toy_classifier(steps: int) -> tuple[object, np.ndarray, np.ndarray, np.ndarray]:
    """Tiny Llama fine-tuned on texts whose label is one evidence token (2 or 3) at a random place."""
    from trustlab.lm import ModelConfig, TrainConfig, build_model
    from trustlab.security.backdoor_complications import LMSequenceClassifier

    rng = np.random.default_rng(0)
    n, T = 128, 8
    X = rng.integers(4, 12, size=(n, T))
    y = (rng.random(n) < 0.5).astype(np.int64)
    pos = rng.integers(0, T, n)
    X[np.arange(n), pos] = np.where(y == 1, 2, 3)
    keep = np.zeros_like(X)
    keep[np.arange(n), pos] = 1  # only the evidence token left
    lm = build_model(ModelConfig("llama", vocab_size=12, d_model=16, n_layers=1, n_heads=2))
    cfg = TrainConfig(steps=steps, batch_size=32, lr=1e-2)
    return LMSequenceClassifier(lm, finetune="full", train=cfg).fit(X, y), X, y, keep


def test_masking_aware_finetuning_copies_and_checks_its_inputs() -> None:
    from trustlab.explain.sop_tokens_masking import finetune_with_token_masking

    with one_thread():
        clf, X, y, _ = _toy_classifier(steps=2)
        before = {k: v.clone() for k, v in clf.net_.state_dict().items()}
        tuned = finetune_with_token_masking(clf, X, y, steps=3, batch_size=8)
    assert all(torch.equal(v, clf.net_.state_dict()[k]) for k, v in before.items())  # a copy is trained
    assert not all(torch.equal(v, tuned.net_.state_dict()[k]) for k, v in before.items())
    assert tuned.losses_.shape == (3,) and np.isfinite(tuned.losses_).all()
    with pytest.raises(ModelError, match="classifier"):
        finetune_with_token_masking(clf.model_, X, y)
    with pytest.raises(TrustlabError, match="max_fraction"):
        finetune_with_token_masking(clf, X, y, max_fraction=1.5)
    with pytest.raises(TrustlabError, match="steps"):
        finetune_with_token_masking(clf, X, y, steps=0)
    with pytest.raises(DataError, match="y must"):
        finetune_with_token_masking(clf, X, y + 5)
    with pytest.raises(DataError, match="attention_mask"):
        finetune_with_token_masking(clf, X, y, attention_mask=X[:, :3])


def test_masking_aware_finetuning_teaches_the_backbone_masked_texts() -> None:
    """A clean fine-tune reads texts with all but the evidence token masked at chance; after
    finetune_with_token_masking it reads them."""
    from trustlab.explain.sop_tokens_masking import finetune_with_token_masking

    with one_thread():
        clf, X, y, keep = _toy_classifier(steps=60)
        tuned = finetune_with_token_masking(clf, X, y, steps=60, learning_rate=1e-2)

        def masked_accuracy(c: object) -> float:
            bb = TokenBackbone(c, None, 0)
            with torch.no_grad():
                z, _ = bb.run(torch.as_tensor(X), torch.ones_like(torch.as_tensor(X)), torch.as_tensor(keep))
            return float(np.mean(z.numpy().argmax(1) == y))

        acc_clean, acc_tuned = masked_accuracy(clf), masked_accuracy(tuned)
        assert np.mean(tuned.predict(X) == y) > 0.9  # clean texts still read
    assert acc_tuned - acc_clean > 6 * np.sqrt(0.25 / len(y)), (acc_clean, acc_tuned)
