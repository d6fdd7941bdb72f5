"""SAeUron (row 003-06) on a user's ``diffusers`` pipeline: its ``.unet`` and its scheduler's schedule.

The fast test uses a pipeline look-alike (a tiny torch denoiser as ``.unet`` and a scheduler
holding only ``alphas_cumprod``) and asks for bit-identical results to passing the denoiser
and the schedule directly; the slow one builds real ``diffusers`` pipelines from a config.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab.errors import TrustlabError  # noqa: E402
from trustlab.explain.sae import SparseAutoencoder  # noqa: E402
from trustlab.unlearning.saeuron import SAeUron  # noqa: E402
from trustlab.vision import DDPMSchedule  # noqa: E402


class _TimedEps(torch.nn.Module):
    """A user's own unconditional eps(x, t) that reads t (so the schedule's timesteps matter)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.inp = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.time = torch.nn.Linear(1, 8)
        self.block = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.out = torch.nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, x, t):
        h = torch.relu(self.inp(x) + self.time(t.float().reshape(-1, 1) / 100)[:, :, None, None])
        return self.out(torch.relu(self.block(h)))


class _Scheduler:
    def __init__(self, alphas_cumprod=None, betas=None, prediction_type="epsilon") -> None:
        self.alphas_cumprod, self.betas = alphas_cumprod, betas
        self.config = type("Config", (), {"prediction_type": prediction_type})()


class _Pipeline:
    """A diffusers pipeline's layout: ``.unet`` and ``.scheduler``."""

    def __init__(self, unet, scheduler) -> None:
        self.unet, self.scheduler = unet, scheduler


def _sae() -> SparseAutoencoder:
    return SparseAutoencoder(16, architecture="batchtopk", k=2, batch_size=256, n_steps=10)


SCHEDULE = DDPMSchedule(num_train_timesteps=100, beta_end=0.05)  # not the default: it must be read


def test_a_pipeline_gives_exactly_its_unet_and_schedule(tmp_path) -> None:
    X = np.random.default_rng(0).standard_normal((6, 1, 8, 8))
    y = np.array([0, 1, 2, 0, 1, 2])
    net = _TimedEps()
    kw = dict(conditional=False, num_inference_steps=4, percentile=50, sae=_sae())
    direct = SAeUron(net, "block", schedule=SCHEDULE, **kw).fit(X, y)
    acp = torch.as_tensor(SCHEDULE.alphas_cumprod)  # diffusers keeps it as a tensor
    pipe = _Pipeline(net, _Scheduler(alphas_cumprod=acp))
    via = SAeUron(pipe, "block", **kw).fit(X, y)
    assert via.denoiser_ is net and via.from_pipeline_ and not direct.from_pipeline_
    assert via.timesteps_.tolist() == direct.timesteps_.tolist() == [75, 50, 25, 0]
    np.testing.assert_array_equal(via.concept_means_, direct.concept_means_)
    out = via.generate(X, unlearn=[1, 2])
    np.testing.assert_array_equal(out, direct.generate(X, unlearn=[1, 2]))
    assert np.abs(out - via.generate(X)).max() > 0
    # betas alone are read as cumprod(1 - betas); a schedule given beside the pipeline must match
    betas = np.linspace(SCHEDULE.beta_start, SCHEDULE.beta_end, SCHEDULE.num_train_timesteps)
    from_betas = SAeUron(_Pipeline(net, _Scheduler(betas=betas)), "block", **kw).fit(X, y)
    np.testing.assert_array_equal(from_betas.generate(X, unlearn=1), direct.generate(X, unlearn=1))
    same = SAeUron(pipe, "block", schedule=SCHEDULE, **kw).fit(X, y)
    np.testing.assert_array_equal(same.concept_means_, direct.concept_means_)
    # saved and loaded onto the pipeline (its scheduler gives the schedule again)
    back = SAeUron.load(via.save(tmp_path / "pipe"), pipe)
    np.testing.assert_array_equal(back.generate(X, unlearn=[1, 2]), out)
    with pytest.raises(TrustlabError, match="noise schedule") as err:  # the bare denoiser: default schedule
        SAeUron.load(tmp_path / "pipe", net)
    assert err.value.argument == "model"


def test_bad_pipelines_are_trustlab_errors() -> None:
    X = np.zeros((4, 1, 8, 8))
    y = np.array([0, 1, 0, 1])
    net = _TimedEps()
    cases = [
        (_Pipeline(net, None), "alphas_cumprod", "model"),
        (
            _Pipeline(net, _Scheduler(SCHEDULE.alphas_cumprod, prediction_type="v_prediction")),
            "epsilon",
            "model",
        ),
        (_Pipeline(net, _Scheduler(np.array([0.5, np.nan]))), r"\(0, 1\]", "model"),
        (_Pipeline(lambda x, t: x, _Scheduler(SCHEDULE.alphas_cumprod)), "torch.nn.Module", "model"),
    ]
    for model, match, arg in cases:
        with pytest.raises(TrustlabError, match=match) as err:
            SAeUron(model, "block", conditional=False, num_inference_steps=2).fit(X, y)
        assert err.value.argument == arg
    pipe = _Pipeline(net, _Scheduler(SCHEDULE.alphas_cumprod))
    with pytest.raises(TrustlabError, match="pipeline's scheduler") as err:
        SAeUron(pipe, "block", schedule=DDPMSchedule(), conditional=False).fit(X, y)
    assert err.value.argument == "schedule"


@pytest.mark.slow  # importing diffusers costs ~7 s of CPU
def test_diffusers_pipelines_are_accepted() -> None:
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    config = dict(
        sample_size=8,
        in_channels=1,
        out_channels=1,
        block_out_channels=(8, 16),
        layers_per_block=1,
        norm_num_groups=4,
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
    )
    unet = diffusers.UNet2DModel.from_config(config).eval()
    pipe = diffusers.DDPMPipeline(unet=unet, scheduler=diffusers.DDPMScheduler(num_train_timesteps=1000))
    X = np.random.default_rng(0).standard_normal((6, 1, 8, 8))
    y = np.array([0, 1, 2, 0, 1, 2])  # unconditional: y only labels the generations
    kw = dict(conditional=False, num_inference_steps=3, percentile=50, sae=_sae())
    su = SAeUron(pipe, "mid_block", **kw).fit(X, y)
    assert su.denoiser_ is unet and su.timesteps_.tolist() == [666, 333, 0]
    np.testing.assert_array_equal(su.alphas_cumprod_, pipe.scheduler.alphas_cumprod.double().numpy())
    direct = SAeUron(unet, "mid_block", **kw).fit(X, y)  # the same linear betas, in float64
    np.testing.assert_allclose(su.generate(X, unlearn=1), direct.generate(X, unlearn=1), atol=1e-4)

    # the pipeline's own sampler runs inside the intervention (same DDIM-leading timesteps)
    def run() -> np.ndarray:
        return pipe(
            batch_size=2, num_inference_steps=3, generator=torch.Generator().manual_seed(0), output_type="np"
        ).images

    base = run()
    with su.unlearning([1, 2]) as hook:
        edited = run()
    assert hook.n_calls == 3 and hook.n_scaled > 0 and np.abs(edited - base).max() > 0
    # a DDIM pipeline with a cosine schedule: its alphas_cumprod are read, not the default's
    ddim = diffusers.DDIMPipeline(
        unet=unet, scheduler=diffusers.DDIMScheduler(beta_schedule="squaredcos_cap_v2")
    )
    cos = SAeUron(ddim, "mid_block", **kw).fit(X, y)
    np.testing.assert_array_equal(cos.alphas_cumprod_, ddim.scheduler.alphas_cumprod.double().numpy())
    assert not np.allclose(cos.alphas_cumprod_, DDPMSchedule().alphas_cumprod)
    assert cos.generate(X[:2], unlearn=0).shape == (2, 1, 8, 8)
