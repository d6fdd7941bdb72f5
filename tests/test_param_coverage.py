"""Every public function declares its scalar parameters (trustlab._param_validation) or says why not.

For each package below, every plain function of ``__all__`` either carries
``_parameter_constraints`` (set by :func:`~trustlab._param_validation.validate_params`) or
is listed in ``EXEMPT`` with the reason. For every declared parameter, a call whose other
arguments are valid and whose value for that parameter is of no valid type raises
:class:`~trustlab.errors.ParameterError` naming that parameter: the check runs, before any
work, and blames the right argument.

The valid arguments are built from the constraints themselves (a number inside each
``Interval``, an entry of each ``Options``, ...); ``RECIPES`` gives them where a type
cannot be built from its constraint. Undeclared required arguments get ``None``: the
declared checks run before the function's body reads them.

``PENDING`` lists exported functions that still lack constraints and are not exempt
(functions of modules this test's author does not own, and names exported while their
owners work on them). Each is a strict expected failure, so declaring one without
removing it from the list fails the suite: the list can only shrink.
"""

from __future__ import annotations

import importlib
import inspect
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trustlab._param_validation import HasMethods, Interval, Options, check_params
from trustlab.errors import ParameterError

PACKAGES = (
    "trustlab.privacy",
    "trustlab.explain",
    "trustlab.fairness",
    "trustlab.uncertainty",
    "trustlab.evaluation",
    "trustlab.audit",
    "trustlab.datasets",
    "trustlab.compute",
    "trustlab.unlearning",
    "trustlab.security",
    "trustlab.theory",
    "trustlab.lm",
    "trustlab.vision",
    "trustlab.efficiency",
)

_SAMPLER = (
    "a security-critical sampler whose scale check is mutation-tested in tools/mutants.py "
    "(tests/privacy/test_samplers.py): kept as is"
)
_REGISTRY = "registry function: its own checks name the section"
_ARRAYS = "arrays only: checked by the array readers"

EXEMPT: dict[str, str] = {
    # trustlab.theory
    "attention_pattern": "its one argument, a trained ICLAttention, is checked by hand (a DataError naming "
    "model; tests/theory/test_multihead_icl.py)",
    # trustlab.compute
    "grouped_dp_boxplot_on": "a driver over a pandas/Dask frame: every argument is checked by the "
    "validated grouped_dp_boxplot_of_counts and the statistics' constructors before any noise",
    "grouped_dp_boxplots_on": "a driver over a pandas/Dask frame and figure mappings: each figure's "
    "arguments are checked as grouped_dp_boxplot_on's before any pass or noise",
    # trustlab.privacy
    "add_discrete_gaussian": _SAMPLER,
    "add_discrete_laplace": _SAMPLER,
    "add_gaussian": _SAMPLER,
    "add_laplace": _SAMPLER,
    "discrete_gaussian": _SAMPLER,
    "discrete_laplace": _SAMPLER,
    "gaussian": _SAMPLER,
    "laplace": _SAMPLER,
    "exponential_select": _ARRAYS + " (log_weights)",
    "reconstruct": _ARRAYS + " (the shares)",
    "low_rank_excess": _ARRAYS + " (A and the components)",
    "boxplot_distance": "two BoxplotStats results only: no scalar parameter",
    "bernoulli": _SAMPLER,
    "uniform_int": _SAMPLER,
    # trustlab.explain
    "brace_path": "forwards **kwargs to brace, which declares them; lams is a sequence read as floats",
    "wachter": "forwards **kwargs to brace, which declares them; model, scm and x only otherwise",
    "deep_backtracking": "forwards **kwargs to brace, which declares them; model, scm and x only otherwise",
    "check_certificate": "objects only (a lime and an explanation), checked by their readers",
    "coef_intercept": "a fitted estimator only",
    "counterfactual_metrics": "objects only (model, SCM, results)",
    "default_action_set": "column-name lists and a bounds mapping, checked against the data's columns",
    "ensemble_from_model": "a fitted tree ensemble only (ModelError names the fix)",
    "trees_from_lightgbm": "a fitted LightGBM model only (ModelError names the fix)",
    "trees_from_sklearn": "a fitted scikit-learn tree ensemble only (ModelError names the fix)",
    "trees_from_xgboost": "a fitted XGBoost model only (ModelError names the fix)",
    # trustlab.fairness
    "confusion_by_group": _ARRAYS,
    "fairness_differences": _ARRAYS + " (a count table)",
    "rates_from_counts": _ARRAYS + " (a count table)",
    "group_rates": _ARRAYS,
    "ensemble_benefits": _ARRAYS + "; privileged is a group label checked against the groups present",
    "ensemble_size_curve": _ARRAYS + "; privileged is a group label checked against the groups present",
    "multiaccuracy_violation": _ARRAYS,
    "proxy_error_rates": _ARRAYS,
    "feature_disparity": _ARRAYS + " (node features and groups)",
    "structural_disparity": _ARRAYS + " (a graph and groups)",
    "load_karate_fairness": "no parameters",
    "load_karate_communities": "no parameters",
    "accuracy": "takes only a torch model and/or arrays, checked by the vision lab's input checks",
    "predict": "takes only a torch model and/or arrays, checked by the vision lab's input checks",
    "check_images": "takes only a torch model and/or arrays, checked by the vision lab's input checks",
    "check_labels": "takes only a torch model and/or arrays, checked by the vision lab's input checks",
    "gradient_alignment": "takes only a torch model and/or arrays, checked by the vision lab's input checks",
    "prunable_weights": "takes only a torch model and/or arrays, checked by the vision lab's input checks",
    "sparsity_of": "takes only a torch model and/or arrays, checked by the vision lab's input checks",
    "decoder_layers": "takes only a model, checked by hand (a ModelError naming model; "
    "tests/efficiency/test_safe_llm.py)",
    "one_thread": "no parameters",
    "require_torch": "no parameters",
    "torch_generator": "a seed only, checked by make_generator",
    "check_point_clouds": "takes only arrays, checked by the vision lab's input checks",
    "digits_ddpm_pair": "a DigitsDDPMRecipe (checked by _check_recipe, naming recipe) and a path",
    "digits_lora_ddpm_pair": "a DigitsDDPMRecipe and a LoRARecipe (checked by _check_recipe / "
    "_check_lora, naming recipe / lora), a bool and a path",
    "digits_conditional_lora_ddpm_pair": "a pair recipe and a LoRARecipe (type- and value-checked, "
    "naming recipe / lora), a bool and a path",
    "lora_parameters": "takes only a torch model (a ModelError names it when it has no adapters)",
    "merge_lora": "takes only a torch model (a ModelError names it when it has no adapters)",
    "digits_finetune_images": "a DigitsDDPMRecipe only, checked by _check_recipe (naming recipe)",
    "train_digits_ddpm_pair": "a DigitsDDPMRecipe only, checked by _check_recipe (naming recipe)",
    "digits_conditional_ddpm": "a ConditionalDDPMRecipe (type-checked, naming recipe) and a path",
    "shape_pointnet": "no parameters",
    "train_shape_pointnet": "no parameters",
    # trustlab.uncertainty
    "gcv": _ARRAYS + "; lam is a float or an array of them, read by _check_lams (its message "
    "keeps the hint: scikit-learn's alpha divided by the number of rows)",
    # trustlab.evaluation
    "error_consistency": _ARRAYS,
    # trustlab.audit
    "default_sections": _REGISTRY,
    "get_section": _REGISTRY,
    "register_section": _REGISTRY,
    "section_names": _REGISTRY,
    "unregister_section": _REGISTRY,
    # trustlab.datasets
    "load_benefits": "no parameters",
    "load_default": "no parameters",
    # trustlab.lm
    "english_corpus": "no parameters",
    "shipped_models": "no parameters",
    "get_recipe": _REGISTRY + " (a name or a mapping checked field by field)",
    "hook_points": "a model only (ModelError names the fix)",
    "run_with_hooks": "a model, token ids and hook names, each checked by the hook readers with "
    "the valid names in the message",
    "load_model": "a path only, checked by the loader (ModelError names the fix)",
    # trustlab.security.safety_decoding
    "safe_generate": "a model, a head and token ids (checked against the vocabulary) and the rules, "
    "checked in one place (_safety_rules._rules) with the argument named",
    "safety_logits_processor": "a fitted head and the rules, checked by _safety_rules._rules",
    # trustlab.security.steering_transfer
    "activation_switch": "a model, a fitted ActivationMapper and a hook, each checked with the argument "
    "named (ModelError, DataError, ParameterError)",
    "load_tokenizer": "a path only, checked by the loader (ModelError names the fix)",
    "save_model": "a model and a path only, checked by the writer",
    "load_shipped": "a shipped model's name, checked against shipped_models() in the message; "
    "cache_dir is a path",
}
"""Public functions that declare nothing, with the reason."""

PENDING: set[str] = set()
"""Functions still to declare (owners other than this test's author); the lead empties it."""


class _Stub:
    """A model/statistic stand-in: any method returns None."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _proof() -> Any:
    from trustlab.explain import AmenableLime, commit_model, prove_explanation

    weights, salt = np.array([1.0, -1.0]), "a salt of at least 16 bytes"

    def f(X: np.ndarray) -> np.ndarray:
        p = 1 / (1 + np.exp(-np.asarray(X) @ weights))
        return np.column_stack([1 - p, p])

    lime = AmenableLime(n_samples=64)
    return prove_explanation(f, [0.3, 0.1], commitment=commit_model(weights, salt), lime=lime)


def _game() -> Any:
    from trustlab.fairness import make_routing_game

    return make_routing_game()


def _sketch() -> Any:
    from trustlab.privacy._sketch_bottomk import BottomKSketch

    return BottomKSketch(4)


def _lm_model() -> Any:
    from trustlab.lm import ModelConfig, build_model

    return build_model(ModelConfig("gpt2", vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_len=8))


def _lm_config() -> Any:
    from trustlab.lm import ModelConfig

    return ModelConfig("gpt2", vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_len=8)


def _lm_data() -> Any:
    from trustlab.lm import sorting_task

    return sorting_task(4, 2, n_values=7)


def _lm_recipe() -> Any:
    from trustlab.lm import get_recipe

    return get_recipe("micro-llama-sorting")


def _icl_model() -> Any:
    from trustlab.theory import ICLAttention

    kq = np.zeros((2, 3, 2))
    kq[0, :2], kq[1, :2] = 0.5 * np.eye(2), -0.5 * np.eye(2)
    return ICLAttention(kq, np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]), np.zeros(1))


RECIPES: dict[str, dict[str, Any]] = {
    "build_model": {"config": _lm_config},
    "evaluate_loss": {"model": _lm_model, "data": _lm_data},
    "train_model": {"model": _lm_model, "data": _lm_data},
    "make_data": {"recipe": _lm_recipe},
    "train_recipe": {"recipe": _lm_recipe},
    "verify_explanation": {"proof": _proof},
    "omwu": {"game": _game},
    "pomwu": {"game": _game},
    "standard_estimate": {"sketch": _sketch},
    "simulate_debiased_gd": {"model": _icl_model},
}
"""Valid values that cannot be built from a constraint (a callable here builds the value lazily)."""


class _Bad:
    """A value of no valid type for any parameter."""


def _public_functions() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                found[name] = obj
    return found


FUNCTIONS = _public_functions()
DECLARED = {name: f for name, f in FUNCTIONS.items() if hasattr(f, "_parameter_constraints")}


def _candidates(constraint: Any) -> list[Any]:
    if constraint is None:
        return [None]
    if isinstance(constraint, Interval):
        lo, hi = constraint.left, constraint.right
        points: list[float]
        if lo is None:
            points = [1.0] if hi is None else [hi - 1.0, hi]
        elif hi is None:
            points = [lo + 1.0, lo]
        else:
            points = [(lo + hi) / 2, lo, hi]
        if constraint.kind is numbers.Integral:
            return [int(np.ceil(p)) for p in points] + [int(np.floor(p)) for p in points]
        return [float(p) for p in points]
    if isinstance(constraint, Options):
        return sorted(constraint.options, key=repr)
    if isinstance(constraint, HasMethods):
        return [_Stub()]
    if constraint is callable:
        return [lambda *args, **kwargs: None]
    if isinstance(constraint, str):
        named: dict[str, list[Any]] = {"boolean": [False], "random_state": [0], "array-like": [[0.0, 1.0]]}
        return named.get(constraint, [])
    simple = {
        str: "x",
        bytes: b"x",
        tuple: (),
        list: [],
        dict: {},
        int: 1,
        float: 1.0,
        numbers.Integral: 1,
        numbers.Real: 1.0,
        os.PathLike: Path("x"),
        np.random.Generator: np.random.default_rng(0),
    }
    if constraint in simple:
        return [simple[constraint]]
    try:
        return [constraint()]
    except Exception:
        return []


def _valid(name: str, options: Any, default: Any) -> Any:
    def ok(value: Any) -> bool:
        try:
            check_params({name: value}, {name: options}, "recipe")
        except ParameterError:
            return False
        return True

    if default is not inspect.Parameter.empty and ok(default):
        return default
    for constraint in options:
        for value in _candidates(constraint):
            if ok(value):
                return value
    raise LookupError(f"no valid value for {name}: add one to RECIPES")


def _valid_call(func: Any) -> dict[str, Any]:
    """Keyword arguments with a valid value for every declared or required parameter."""
    name = func.__name__
    constraints = func._parameter_constraints
    recipe = RECIPES.get(name, {})
    kwargs: dict[str, Any] = {}
    for pname, param in inspect.signature(func).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        assert param.kind is not param.POSITIONAL_ONLY, f"{name}: positional-only {pname}"
        if pname in recipe:
            value = recipe[pname]
            kwargs[pname] = value() if callable(value) and not isinstance(value, type) else value
        elif pname in constraints and constraints[pname] != "no_validation":
            kwargs[pname] = _valid(pname, constraints[pname], param.default)
        elif param.default is inspect.Parameter.empty:
            kwargs[pname] = None
    return kwargs


CASES = [
    (name, pname)
    for name, func in DECLARED.items()
    for pname, options in func._parameter_constraints.items()
    if options != "no_validation"
]


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_declared_or_exempt(name: str, request: pytest.FixtureRequest) -> None:
    if name in PENDING:
        request.applymarker(pytest.mark.xfail(strict=True, reason="constraints still to declare"))
    declared = name in DECLARED
    assert not (declared and name in EXEMPT), f"{name} declares constraints: remove it from EXEMPT"
    assert declared or name in EXEMPT, f"{name} neither declares constraints nor is in EXEMPT"


def test_lists_name_public_functions() -> None:
    assert not set(EXEMPT) - set(FUNCTIONS), "EXEMPT names no public function"
    assert not PENDING - set(FUNCTIONS), "PENDING names no public function"
    assert not PENDING & set(EXEMPT)
    assert not set(RECIPES) - set(DECLARED)
    assert all(reason.strip() for reason in EXEMPT.values())


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_declared_parameters_exist(name: str) -> None:
    func = DECLARED[name]
    assert set(func._parameter_constraints) <= set(inspect.signature(func).parameters)


@pytest.mark.parametrize(("name", "pname"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_bad_value_names_the_argument(name: str, pname: str) -> None:
    func = DECLARED[name]
    kwargs = _valid_call(func)
    check_params(kwargs, func._parameter_constraints, name)  # the recipe itself is valid
    with pytest.raises(ParameterError) as info:
        func(**{**kwargs, pname: _Bad()})
    assert info.value.argument == pname
    assert f"{pname} of {name} must be" in str(info.value)
