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
from trustlab.theory.lr_schedules import (
    SCHEDULES as LR_SCHEDULES,
)
from trustlab.theory.lr_schedules import (
    MLPScheduleRun,
    ScheduleBound,
    ScheduleSimulation,
    schedule,
    schedule_bound,
    simulate_schedules,
    train_mlp_schedules,
)
from trustlab.theory.pretraining import (
    SampleComplexity,
    SampleComplexitySimulation,
    information_exponent,
    pca_overlap,
    sample_complexity,
    simulate_sample_complexity,
)
from trustlab.theory.relu_regions import (
    ConvexFitComparison,
    TriangleFit,
    TriangleNet,
    count_linear_regions_1d,
    fit_random_relu,
    fit_triangle_net,
    simulate_convex_fit,
    theorem_scales,
)

__all__: list[str] = [
    "LR_SCHEDULES",
    "SCHEMES",
    "ConvexFitComparison",
    "MLPScheduleRun",
    "SampleComplexity",
    "SampleComplexitySimulation",
    "SamplerError",
    "SamplerSimulation",
    "ScheduleBound",
    "ScheduleSimulation",
    "TriangleFit",
    "TriangleNet",
    "VPSchedule",
    "continuous_covariance",
    "count_linear_regions_1d",
    "fit_random_relu",
    "fit_triangle_net",
    "forward_covariance",
    "gaussian_w2",
    "information_exponent",
    "pca_overlap",
    "sample_complexity",
    "sampler_covariance",
    "sampler_w2",
    "schedule",
    "schedule_bound",
    "simulate_convex_fit",
    "simulate_sample_complexity",
    "simulate_sampler",
    "simulate_schedules",
    "theorem_scales",
    "train_mlp_schedules",
]
