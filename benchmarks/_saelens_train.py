"""Train SAELens (sae-lens 6.x) SAEs on an activation file: the peer side of ``explain_sae_vs_saelens``.

Runs in the separate SAELens virtual environment (``tools/saelens_venv.sh``), never in trustlab's;
it imports neither trustlab nor anything of this repository. The benchmark calls::

    VENV/bin/python benchmarks/_saelens_train.py --train TRAIN.npy --arch topk --n-latents 768 \
        --k 16 --batch-size 256 --n-steps 300 --lr 3e-3 --prefixes 24,72,168,360,768 \
        --repeats 3 --out WEIGHTS.npz

and reads one JSON line from stdout: per repeat the wall and CPU seconds of building the trainer
and ``SAETrainer.fit()`` (one thread), SAELens's own FVU on the training rows (a check of the
exported weights), plus versions. The weights of the first repeat go to
``--out`` in the input's units, decoder norms folded in (``fold_W_dec_norm``), so that
``f(x) = sigma((x - b_dec) W_enc + b_enc)`` and ``x_hat = f W_dec + b_dec`` with ``sigma`` the
row TopK (``topk``) or the threshold ``topk_threshold`` (BatchTopK and Matryoshka, SAELens's
JumpReLU inference model).

Setup, matched to trustlab's ``SparseAutoencoder``: inputs divided by the square root of the
training rows' mean squared norm (the same scale as trustlab's; SAELens then runs with
``normalize_activations="none"`` and the scale is folded back after training), Adam
(0.9, 0.999), learning rate warmed up linearly over the first 5% of steps and decayed linearly
to 0 over the last 20% (SAELens's ``constant`` scheduler with ``lr_warm_up_steps`` and
``lr_decay_steps``), gradient-norm clipping at 1 (SAELens's fixed rule), a latent dead after
``--dead-after`` steps without firing. The rest is SAELens's own recipe: decoder rows initialised
to norm 0.1 with ``W_enc = W_dec^T``, ``rescale_acts_by_decoder_norm=True``, AuxK coefficient 1
(scaled by the dead fraction), EMA BatchTopK threshold (``topk_threshold_lr = 0.01``). Batches
are drawn without replacement from a seeded permutation, reshuffled at each epoch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

import numpy as np
import torch


def _batches(X: torch.Tensor, batch_size: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    n = X.shape[0]
    while True:
        perm = torch.randperm(n, generator=gen)
        for start in range(0, n - batch_size + 1, batch_size):
            yield X[perm[start : start + batch_size]]


def _config(args: argparse.Namespace, d: int):
    from sae_lens.saes.batchtopk_sae import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig
    from sae_lens.saes.matryoshka_batchtopk_sae import (
        MatryoshkaBatchTopKTrainingSAE,
        MatryoshkaBatchTopKTrainingSAEConfig,
    )
    from sae_lens.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig

    common = {"d_in": d, "d_sae": args.n_latents, "dtype": "float32", "device": "cpu"}
    if args.arch == "topk":
        return TopKTrainingSAE, TopKTrainingSAEConfig(k=args.k, **common)
    if args.arch == "batchtopk":
        return BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig(k=float(args.k), **common)
    widths = [int(w) for w in args.prefixes.split(",")]
    cfg = MatryoshkaBatchTopKTrainingSAEConfig(k=float(args.k), matryoshka_widths=widths, **common)
    return MatryoshkaBatchTopKTrainingSAE, cfg


def _train_once(args: argparse.Namespace, X: torch.Tensor):
    from sae_lens.config import LoggingConfig, SAETrainerConfig
    from sae_lens.training.sae_trainer import SAETrainer

    torch.manual_seed(args.seed)
    sae_cls, sae_cfg = _config(args, X.shape[1])
    trainer_cfg = SAETrainerConfig(
        total_training_samples=args.n_steps * args.batch_size,
        train_batch_size_samples=args.batch_size,
        lr=args.lr,
        lr_end=args.lr,
        lr_scheduler_name="constant",
        lr_warm_up_steps=max(1, min(1000, args.n_steps // 20)),
        lr_decay_steps=args.n_steps - int(0.8 * args.n_steps),
        adam_beta1=0.9,
        adam_beta2=0.999,
        device="cpu",
        dead_feature_window=args.dead_after,
        feature_sampling_window=max(2000, args.n_steps + 1),
        save_final_checkpoint=False,
        logger=LoggingConfig(log_to_wandb=False, eval_every_n_wandb_logs=2**31 - 1),
    )
    wall, cpu = time.perf_counter(), time.process_time()
    sae = sae_cls(sae_cfg)
    trainer = SAETrainer(cfg=trainer_cfg, sae=sae, data_provider=_batches(X, args.batch_size, args.seed))
    trainer.fit()
    return sae, time.perf_counter() - wall, time.process_time() - cpu


@torch.no_grad()
def _native_train_fvu(sae, X: torch.Tensor) -> float:
    """FVU of SAELens's own training-mode encode/decode on all training rows (row TopK, or BatchTopK
    over all rows at once): the benchmark recomputes it from the exported weights as a check."""
    sae.eval()
    X_hat = sae.decode(sae.encode(X))
    return float(((X - X_hat) ** 2).sum() / ((X - X.mean(0)) ** 2).sum())


@torch.no_grad()
def _export(sae, scale: float, arch: str) -> dict[str, np.ndarray]:
    assert sae.cfg.apply_b_dec_to_input
    if sae.cfg.rescale_acts_by_decoder_norm:
        sae.fold_W_dec_norm()  # f becomes the trained (norm-rescaled) activations; threshold unchanged
    threshold = float(sae.topk_threshold) if arch != "topk" else 0.0
    return {
        "W_enc": (sae.W_enc / scale).double().numpy(),
        "b_enc": sae.b_enc.double().numpy(),
        "W_dec": (sae.W_dec * scale).double().numpy(),
        "b_dec": (sae.b_dec * scale).double().numpy(),
        "threshold": np.array(threshold),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--arch", choices=("topk", "batchtopk", "matryoshka"), required=True)
    parser.add_argument("--n-latents", type=int, required=True)
    parser.add_argument("--k", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--n-steps", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--prefixes", default="")
    parser.add_argument("--dead-after", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    import sae_lens

    X = torch.as_tensor(np.load(args.train), dtype=torch.float32)
    scale = float(torch.sqrt((X**2).sum(1).mean()).clamp_min(1e-12))
    X = X / scale
    walls, cpus = [], []
    for r in range(args.repeats):
        sae, wall, cpu = _train_once(args, X)
        walls.append(wall)
        cpus.append(cpu)
        if r == 0:
            native = _native_train_fvu(sae, X)
            np.savez(args.out, allow_pickle=False, **_export(sae, scale, args.arch))
    print(
        json.dumps(
            {
                "fit_s": walls,
                "cpu_s": cpus,
                "fvu_native_train": native,
                "sae_lens": sae_lens.__version__,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
