"""trustlab.theory: calculators that reproduce a paper's result, each with a ``simulate`` beside it."""

from trustlab.theory.diffusion_gaussian import (
    SCHEMES,
    SamplerError,
    SamplerSimulation,
    VPSchedule,
    continuous_covariance,
    forward_covariance,
    gaussian_w2,
    sampler_covariance,
    sampler_w2,
    simulate_sampler,
)

__all__: list[str] = [
    "SCHEMES",
    "SamplerError",
    "SamplerSimulation",
    "VPSchedule",
    "continuous_covariance",
    "forward_covariance",
    "gaussian_w2",
    "sampler_covariance",
    "sampler_w2",
    "simulate_sampler",
]
