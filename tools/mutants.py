"""Mutation check for trustlab's privacy code: each mutant must make a test fail.

Each mutant is a one-line edit that mis-scales a mechanism's noise or budget split
(the bugs that leak while the ledger looks right). The script copies the tree to a
temporary folder, applies one mutant at a time there, runs the tests named for it
and reports whether they failed (the mutant is "caught") or passed ("SURVIVED").
The working tree is never modified.

Usage::

    python tools/mutants.py            # every mutant
    python tools/mutants.py boxplot    # mutants whose name contains "boxplot"

Exit status 1 when a mutant survives (or its edit no longer applies: the list must
follow the code); 2 when the named tests fail on the unmutated tree (the control).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS: list[Mutant] = [
    Mutant(
        "sampler: 32-bit integer domain (the ±2^31 clamp)",
        "src/trustlab/privacy/samplers.py",
        'dp.atom_domain(T="i64")',
        'dp.atom_domain(T="i32")',
        ("tests/privacy/test_samplers.py",),
    ),
    Mutant(
        "exact discrete Laplace: zero counted twice (B = 1, Y = 0 not rejected)",
        "src/trustlab/privacy/_exact_laplace.py",
        "keep = ~(negative & (y == 0) & safe)",
        "keep = np.ones(u.size, dtype=bool)",
        ("tests/privacy/test_samplers.py",),
    ),
    Mutant(
        "exact discrete Laplace: the first Bernoulli rounds share one draw for every K",
        "src/trustlab/privacy/_exact_laplace.py",
        "fail = w >= num[:, None] * _SHARE[None, :]",
        "fail = w >= num[:, None] * 12",
        ("tests/privacy/test_samplers.py",),
    ),
    Mutant(
        "sampler: scales beyond 2^52 served inexactly",
        "src/trustlab/privacy/samplers.py",
        "if integer and scale > MAX_INTEGER_SCALE:",
        "if False and integer and scale > MAX_INTEGER_SCALE:",
        ("tests/privacy/test_samplers.py", "tests/privacy/test_statistics_privacy.py"),
    ),
    Mutant(
        "quantiles: tie-breaking jitter from a seeded generator",
        "src/trustlab/privacy/_grid.py",
        "uniform_int(self.jitter, int(need.sum()))",
        "np.random.default_rng(0).integers(self.jitter, size=int(need.sum()))",
        (
            "tests/privacy/test_quantiles.py",
            "tests/privacy/test_quantiles_exact.py",
            "tests/privacy/test_quantiles_audit.py",
        ),
    ),
    Mutant(
        "quantiles: JointExp at twice its epsilon",
        "src/trustlab/privacy/_jointexp.py",
        "a = epsilon / (2.0 * sensitivity)",
        "a = epsilon / sensitivity",
        ("tests/privacy/test_quantiles_exact.py",),
    ),
    Mutant(
        "quantiles: independent baseline spends epsilon per level",
        "src/trustlab/privacy/quantiles.py",
        "eps_each = epsilon / levels.size",
        "eps_each = epsilon",
        ("tests/privacy/test_quantiles.py", "tests/privacy/test_quantiles_exact.py"),
    ),
    Mutant(
        "boxplot: upper-extreme scan spends the whole quantile budget",
        "src/trustlab/privacy/_boxplot_core.py",
        "qmax = extreme(1 - q_n, eps_q / 5, True)",
        "qmax = extreme(1 - q_n, eps_q, True)",
        ("tests/privacy/test_boxplot_budget.py",),
    ),
    Mutant(
        "boxplot: outlier-share noise halved",
        "src/trustlab/privacy/_boxplot_rules.py",
        'return (2.0 if neighbouring == "replace" else 1.0) / eps_o',
        'return (1.0 if neighbouring == "replace" else 0.5) / eps_o',
        ("tests/privacy/test_boxplot_budget.py",),
    ),
    Mutant(
        "boxplot: released n with half its noise",
        "src/trustlab/privacy/_boxplot_core.py",
        "n_pub = float(max(1, int(add_discrete_laplace(data.size, 1.0 / eps_n))))",
        "n_pub = float(max(1, int(add_discrete_laplace(data.size, 0.5 / eps_n))))",
        ("tests/privacy/test_boxplot_budget.py",),
    ),
    Mutant(
        "boxplot: shares not post-processed into [0, 1]",
        "src/trustlab/privacy/_boxplot_core.py",
        "(k / n_pub for k in clamp_counts(noisy[0], noisy[1], n_pub))",
        "(k / n_pub for k in noisy)",
        ("tests/privacy/test_boxplot.py",),
    ),
    Mutant(
        "boxplot: exact group sizes published",
        "src/trustlab/privacy/_boxplot_grouped.py",
        "noisy = add_discrete_laplace(exact.astype(np.int64), sens / eps_c)",
        "noisy = exact.astype(np.int64)",
        ("tests/privacy/test_boxplot.py", "tests/privacy/test_boxplot_budget.py"),
    ),
    # The distributed quantile/boxplot path (compute/quantiles): the releases from merged
    # counts must be the in-process mechanisms; each edit mis-scales what only this path reads.
    Mutant(
        "quantiles from counts: outlier counts drawn at twice their budget",
        "src/trustlab/compute/_quantile_release.py",
        "stats = box_finish(pending, int(lo), int(hi))",
        "stats = box_finish(replace(pending, scale=pending.scale / 2), int(lo), int(hi))",
        (
            "tests/compute/test_quantiles.py::test_boxplot_from_counts_equals_the_in_process_boxplot",
            "tests/compute/test_quantiles.py::test_audit_boxplot_outlier_share_from_counts",
        ),
    ),
    Mutant(
        "quantiles from counts: outlier-share noise at the add/remove sensitivity under replace",
        "src/trustlab/compute/_quantile_release.py",
        "opts = _options(summary, neighbouring, kwargs)",
        'opts = _options(summary, "add_remove", kwargs)',
        ("tests/compute/test_quantiles.py::test_boxplot_from_counts_equals_the_in_process_boxplot",),
    ),
    Mutant(
        "quantiles from counts: replace-one figure split as add/remove (sizes and boxes)",
        "src/trustlab/compute/_quantile_release.py",
        "        first.bounds,\n        neighbouring,\n",
        '        first.bounds,\n        "add_remove",\n',
        ("tests/compute/test_quantiles.py::test_grouped_boxplot_from_counts_equals_the_in_process_figure",),
    ),
    Mutant(
        "quantiles from counts: JointExp utility at the add/remove sensitivity where replace is claimed",
        "src/trustlab/compute/_quantile_release.py",
        "        method=method,\n        neighbouring=neighbouring,\n",
        '        method=method,\n        neighbouring="add_remove",\n',
        ("tests/compute/test_quantiles.py::test_quantiles_from_counts_equal_the_in_process_release",),
    ),
    Mutant(
        "quantiles from counts: grid and bucket counts of unclipped values",
        "src/trustlab/compute/_quantile_state.py",
        "z = np.clip(x[present], *self.bounds)",
        "z = x[present]",
        (
            "tests/compute/test_quantiles.py::test_state_merges_to_the_whole_column_on_any_partitioning",
            "tests/compute/test_quantiles.py::test_quantiles_from_counts_equal_the_in_process_release",
            "tests/compute/test_quantiles.py::test_boxplot_from_counts_equals_the_in_process_boxplot",
        ),
    ),
    Mutant(
        "dsi: transposed Cholesky factor in the sampler",
        "src/trustlab/privacy/_dsi_noise.py",
        "out += (z[:, :r] @ self.chol.T) @ self.basis.T",
        "out += (z[:, :r] @ self.chol) @ self.basis.T",
        ("tests/privacy/test_dsi_covariance.py", "tests/privacy/test_dsi.py"),
    ),
    Mutant(
        "dsi: accountant with half the sensitivity",
        "src/trustlab/privacy/dsi.py",
        "m = sigma / math.sqrt(k)",
        "m = 2 * sigma / math.sqrt(k)",
        ("tests/privacy/test_dsi.py", "tests/privacy/test_accounting.py"),
    ),
    Mutant(
        "label dp: keep probability for 2 delta",
        "src/trustlab/privacy/_rr_geometry.py",
        "p = (math.exp(epsilon) + delta) / (1.0 + math.exp(epsilon))",
        "p = (math.exp(epsilon) + 2 * delta) / (1.0 + math.exp(epsilon))",
        ("tests/privacy/test_label_dp.py",),
    ),
    Mutant(
        "label dp: inverted keep coin",
        "src/trustlab/privacy/_rr_mechanism.py",
        "return np.where(keep, y, 1 - y).astype(np.int64)",
        "return np.where(keep, 1 - y, y).astype(np.int64)",
        ("tests/privacy/test_label_dp.py",),
    ),
    Mutant(
        "linear sketch: rounding left out of the sensitivity",
        "src/trustlab/privacy/_ltm_release.py",
        'return (1.0 if neighbouring == "replace" else 0.5) / SCALE',
        "return 0.0",
        ("tests/privacy/test_linear_sketch_grid.py", "tests/privacy/test_linear_sketch.py"),
    ),
    Mutant(
        "statistics: dp_count with half its noise",
        "src/trustlab/privacy/statistics.py",
        "noisy = max(0, int(add_discrete_laplace(n, 1.0 / epsilon)))",
        "noisy = max(0, int(add_discrete_laplace(n, 0.5 / epsilon)))",
        ("tests/privacy/test_statistics_privacy.py",),
    ),
    Mutant(
        "statistics: dp_sum noise for sensitivity 1 instead of the resolution",
        "src/trustlab/privacy/_sums.py",
        "add_discrete_laplace(units, resolution / epsilon)",
        "add_discrete_laplace(units, 1.0 / epsilon)",
        ("tests/privacy/test_statistics_privacy.py",),
    ),
    Mutant(
        "statistics: dp_histogram with half its noise",
        "src/trustlab/privacy/statistics.py",
        "noisy = add_discrete_laplace(counts, 1.0 / epsilon)",
        "noisy = add_discrete_laplace(counts, 0.5 / epsilon)",
        ("tests/privacy/test_statistics_privacy.py",),
    ),
    Mutant(
        "statistics: dp_mean not clipped into its bounds",
        "src/trustlab/privacy/statistics.py",
        "float(np.clip(lower + total.value / n, lower, upper))",
        "float(lower + total.value / n)",
        ("tests/privacy/test_statistics_privacy.py",),
    ),
    Mutant(
        "audit: held-out split by a seeded permutation (not per row)",
        "src/trustlab/audit/split.py",
        "    return _unit(h) < float(test_size)",
        "    return np.random.default_rng(0).permutation(h.size) < float(test_size) * h.size",
        ("tests/audit/test_split.py",),
    ),
    Mutant(
        "private Dask audit: Data section's clipped sums at half their budget",
        "src/trustlab/audit/sections/data.py",
        "acc.remaining_epsilon,\n                        resolution=SUM_RESOLUTION,",
        "acc.remaining_epsilon / 2,\n                        resolution=SUM_RESOLUTION,",
        ("tests/audit/test_scale_private.py::test_ledger_identical_to_in_process",),
    ),
    Mutant(
        "private Dask audit: the raw row count in the report's scale block",
        "src/trustlab/audit/_scale_private.py",
        '"rows": schema.rows,  # public',
        '"rows": int(first["rows"]),  # public',
        ("tests/audit/test_scale_private.py::test_dask_report_leaks_no_raw_count",),
    ),
    Mutant(
        "private Dask audit: training sample rate from the Parquet footers' row counts",
        "src/trustlab/audit/_scale_private.py",
        "rate = 1.0 if schema.rows is None else sample_rate(sample_rows, schema.rows, test_size)",
        "rate = sample_rate(sample_rows, schema.rows or check_parquet_schemas(files)[1], test_size)",
        ("tests/audit/test_scale_private.py::test_sample_rate_reads_only_public_facts",),
    ),
    Mutant(
        "private Dask audit: group levels read from the data (not the schema)",
        "src/trustlab/audit/_scale_private.py",
        "| group_statistics(conf, p.schema, p.sensitive)",
        "| group_statistics(conf, Schema.from_dict({'columns': {a: {'categories': "
        "sorted(set(conf[a].dropna()), key=str)} for a in p.sensitive}}), p.sensitive)",
        ("tests/audit/test_scale_private.py::test_structure_does_not_depend_on_the_rows",),
    ),
    Mutant(
        "training: model splitting keeps the whole gradient (amplification not earned)",
        "src/trustlab/privacy/_training_core.py",
        "masked.append(torch.where(keep, g, torch.zeros_like(g)))",
        "masked.append(torch.where(finite.reshape(-1, *[1] * blk.dim()), g, torch.zeros_like(g)))",
        ("tests/privacy/test_training.py",),
    ),
    Mutant(
        "training: balanced schedule puts every row in every step",
        "src/trustlab/privacy/training.py",
        "r, c = np.nonzero(bis_schedule(m, steps, participations))",
        "r, c = np.nonzero(bis_schedule(m, steps, steps))",
        ("tests/privacy/test_training.py",),
    ),
    Mutant(
        "audit screening: private mode screens the rows (which columns the model uses leaks)",
        "src/trustlab/audit/audit.py",
        "            if not self.private:\n                return screen_columns(",
        "            if True:\n                return screen_columns(",
        ("tests/audit/test_leakage.py::test_private_mode_screens_the_names_only_and_says_so",),
    ),
    Mutant(
        "audit screening: a declared text column ignored (private mode then fits on its values)",
        "src/trustlab/audit/_public_screening.py",
        'text = [str(c) for c in features if schema is not None and schema.kind(str(c)) == "text"]',
        "text: list[str] = []",
        (
            "tests/audit/test_text_hypotheses.py::test_private_audit_with_declared_text_column_runs_and_leaves_it_out",
        ),
    ),
    Mutant(
        "loader: private mode drops Unnamed: 0 by its values (a data-dependent column)",
        "src/trustlab/datasets/loaders.py",
        "if unnamed and (schema is None or unnamed[0] not in schema):",
        "if unnamed and df[unnamed[0]].is_unique:",
        ("tests/audit/test_private_leaks.py",),
    ),
    Mutant(
        "cells: unguarded float conversion (10**400, Decimal('sNaN') raise)",
        "src/trustlab/datasets/_cells.py",
        'except Exception:  # 10**400 (OverflowError), Decimal("sNaN") (ValueError)',
        "except ZeroDivisionError:",
        ("tests/audit/test_private_leaks.py",),
    ),
    Mutant(
        "row hash: unguarded factorize (a cell that does not hash raises)",
        "src/trustlab/audit/split.py",
        'except Exception:  # cells that do not hash (lists, Decimal("sNaN")): hash their text',
        "except ZeroDivisionError:",
        ("tests/audit/test_private_leaks.py",),
    ),
    Mutant(
        "parquet: private mode compares the files' column types",
        "src/trustlab/datasets/loaders.py",
        "for name in [] if private else want.names:",
        "for name in want.names:",
        ("tests/audit/test_private_leaks.py",),
    ),
    Mutant(
        "training: float32 noise added to the float sum (low bits leak)",
        "src/trustlab/privacy/_training_core.py",
        "noisy = add_grid_noise(units, std / grid).astype(np.float64) * grid",
        "noisy = torch.cat([(r.sum(0).float() + torch.randn(r.shape[1:], generator=gen) * std).reshape(-1) "
        "for r in rows]).numpy()",
        ("tests/privacy/test_training_grid.py",),
    ),
    Mutant(
        "training: the grid's sensitivity slack not charged",
        "src/trustlab/privacy/training.py",
        "effective = sigma / (1.0 + 1e-9 + math.sqrt(n_params) * grid / (2.0 * clip)) if grid_on else sigma",
        "effective = sigma",
        ("tests/privacy/test_training.py::test_release_equals_poisson_accountant_and_one_ledger_line",),
    ),
    Mutant(
        "training: the exact noise's density-ratio epsilon share not charged at large epsilon",
        "src/trustlab/privacy/_training_calibration.py",
        "return 2.0 * n * eta, (delta - tail) * math.exp(-n * eta)",
        "return 0.0, (delta - tail) * math.exp(-n * eta)",
        (
            "tests/privacy/test_training_grid.py::test_large_epsilon_fits_with_the_default_delta_and_charges_the_grid",
        ),
    ),
    Mutant(
        "secure_agg: the client's commitment randomness fixed (the commitment stops hiding)",
        "src/trustlab/privacy/_janus.py",
        "a, b = _commit.random_scalar(), _commit.random_scalar()",
        "a, b = 1, 1",
        (
            "tests/privacy/test_secure_agg_attacks.py::test_claim_each_servers_view_is_independent_of_an_honest_input",
        ),
    ),
    Mutant(
        "secure_agg: the client skips the check of the sum against the commitment",
        "src/trustlab/privacy/_janus.py",
        "        if not ok:\n",
        "        if False:\n",
        ("tests/privacy/test_secure_agg_attacks.py",),
    ),
    Mutant(
        "mpc_knn: the sign-bit circuit drops the carry (wrong comparisons)",
        "src/trustlab/privacy/_mpc2.py",
        "return ((s >> U64(63)) ^ (g >> U64(62))) & U64(1)",
        "return (s >> U64(63)) & U64(1)",
        ("tests/privacy/test_mpc_knn.py::test_secure_sign_bit_and_compare_swap_match_plaintext",),
    ),
    Mutant(
        "graph_ldp: the multi-bit mechanism spends epsilon on every sampled dimension (m x epsilon)",
        "src/trustlab/privacy/graph_ldp.py",
        "    e = math.exp(epsilon / m)\n    rows, cols",
        "    e = math.exp(epsilon)\n    rows, cols",
        ("tests/privacy/test_graph_ldp.py::test_claim_per_node_mechanism_audit_on_worst_case_neighbours",),
    ),
    Mutant(
        "graph_ldp: the piecewise mechanism spends epsilon on every sampled dimension (m x epsilon)",
        "src/trustlab/privacy/graph_ldp.py",
        "    window, cells, p_in = _pm_layout(epsilon / m, grid)",
        "    window, cells, p_in = _pm_layout(epsilon, grid)",
        ("tests/privacy/test_graph_ldp.py::test_claim_piecewise_mechanism_audit_on_worst_case_neighbours",),
    ),
    Mutant(
        "graph_ldp: the piecewise mechanism's outside cells skip the window wrongly (cell offset by one)",
        "src/trustlab/privacy/graph_ldp.py",
        "    cell = np.where(inside | (offset < start), start * inside + offset, offset + window)",
        "    cell = np.where(inside | (offset < start), start * inside + offset, offset + window - 1)",
        ("tests/privacy/test_graph_ldp.py::test_piecewise_sampler_draws_the_stated_cell_distribution",),
    ),
    Mutant(
        "text: Cape's bucketised draw charged the paper's nominal epsilon (bucket sizes ignored)",
        "src/trustlab/privacy/_text_accounting.py",
        "    return float(h - np.logaddexp(0.0, h) + least.max())",
        "    return 2.0 * h",
        ("tests/privacy/test_text.py::test_claim_exact_audit_on_worst_case_neighbours",),
    ),
    Mutant(
        "text: Cape's in-bucket draw not uniform (the bucket's first token)",
        "src/trustlab/privacy/text.py",
        "    return int(members[int(uniform_int(int(sizes[b]), 1)[0])])",
        "    return int(members[0])",
        ("tests/privacy/test_text.py::test_claim_empirical_audit_of_the_sampler_on_worst_case_neighbours",),
    ),
    Mutant(
        "dp_icl: per-token noise calibrated to one step (composition over tokens ignored)",
        "src/trustlab/privacy/dp_icl.py",
        "check_epsilon(epsilon), check_delta(delta), math.sqrt(n) * step_sensitivity(top_k)",
        "check_epsilon(epsilon), check_delta(delta), step_sensitivity(top_k)",
        ("tests/privacy/test_dp_icl.py::test_claim_exact_composed_accounting",),
    ),
    Mutant(
        "dp_icl: subsets' distributions not clipped to the simplex (sensitivity unbounded)",
        "src/trustlab/privacy/dp_icl.py",
        "    return x / np.maximum(x.sum(axis=-1, keepdims=True), 1.0)",
        "    return x",
        ("tests/privacy/test_dp_icl.py::test_audit_one_token_with_unnormalised_inputs",),
    ),
    Mutant(
        "dp_icl: the top-p candidate set read off the private subsets' distributions",
        "src/trustlab/privacy/dp_icl.py",
        "                vocab = public_vocabulary(p_pub, top_k, top_p)  # public prompt only",
        "                vocab = public_vocabulary(p_priv.mean(axis=0), top_k, top_p)",
        ("tests/privacy/test_dp_icl.py::test_top_p_candidates_come_from_the_public_distribution_only",),
    ),
    Mutant(
        "dp_icl Algorithm 3: noise calibrated for a 4x smaller sampling rate than drawn",
        "src/trustlab/privacy/dp_icl_subsampling.py",
        "    return _calibrate(epsilon, delta, size / n, steps, sensitivity)",
        "    return _calibrate(epsilon, delta, size / (4 * n), steps, sensitivity)",
        ("tests/privacy/test_dp_icl_subsampling.py::test_claim_exact_subsampled_accounting",),
    ),
    Mutant(
        "dp_icl Algorithm 3: subsets drawn from a seeded RNG (the draw is not secret)",
        "src/trustlab/privacy/dp_icl_subsampling.py",
        "    picked = secrets.SystemRandom().sample(range(n), size)",
        '    picked = __import__("random").Random(0).sample(range(n), size)',
        ("tests/privacy/test_dp_icl_subsampling.py::test_subsets_come_from_the_os_csprng_not_a_seed",),
    ),
    Mutant(
        "dp_icl_text: every label given the whole budget (no split over the labels)",
        "src/trustlab/privacy/dp_icl_text.py",
        "    share_eps, share_delta = epsilon / len(names), delta / len(names)",
        "    share_eps, share_delta = epsilon, delta",
        (
            "tests/privacy/test_dp_icl_text.py::test_claim_text_release_charges_the_whole_budget_split_over_labels",
        ),
    ),
    Mutant(
        "FineXtract: interpolation toward the base instead of extrapolation past the fine-tuned model",
        "src/trustlab/privacy/finextract.py",
        "eps_pretrained + guidance_scale * (eps_finetuned - eps_pretrained)",
        "eps_pretrained + (eps_finetuned - eps_pretrained) / guidance_scale",
        (
            "tests/privacy/test_finextract.py::test_guided_eps_is_the_papers_extrapolation",
            "tests/privacy/test_finextract.py::test_claim_fast_guidance_concentrates_on_the_finetuning_images",
        ),
    ),
    Mutant(
        "Renyi accounting: fractional-order quadrature grid stops at 40 z, cutting off the mass near alpha",
        "src/trustlab/privacy/_amplification_rdp.py",
        "hi = float(a.max()) + 40.0 * z",
        "hi = 40.0 * z",
        ("tests/privacy/test_amplification.py::test_fractional_quadrature_equals_a_ten_times_finer_grid",),
    ),
    Mutant(
        "schema draft: category threshold one lower, so a value held by one row is released too often",
        "src/trustlab/datasets/draft.py",
        "return 1 + max(0, math.ceil(need - 1e-12))",
        "return max(1, math.ceil(need - 1e-12))",
        ("tests/datasets/test_draft.py::test_threshold_bounds_the_chance_of_releasing_a_single_row",),
    ),
    Mutant(
        "schema draft: a declared text column read as a categorical one (its values released)",
        "src/trustlab/datasets/draft.py",
        'kinds.update({c: "text" for c in texts})',
        "pass",
        ("tests/datasets/test_draft.py::test_declared_text_columns_are_drafted_as_text_and_cost_nothing",),
    ),
]


def _pytest(workdir: Path, tests: tuple[str, ...], *, show: bool = False) -> int:
    # TRUSTLAB_SLOW=1: the slow profile's full-power audits run under every mutant
    env = dict(os.environ, PYTHONPATH=str(workdir / "src"), MPLBACKEND="Agg", TRUSTLAB_SLOW="1")
    # -n 0: one process (the README's addopts run xdist, under which -x stops with exit status 2)
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", *tests]
    done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=1800)
    if show and done.returncode != 0:
        print((done.stdout + done.stderr)[-4000:])
    return done.returncode


def run(mutant: Mutant, workdir: Path) -> str:
    target = workdir / mutant.path
    original = target.read_text()
    if original.count(mutant.old) != 1:
        return "STALE (edit does not apply once)"
    target.write_text(original.replace(mutant.old, mutant.new))
    try:
        code = _pytest(workdir, mutant.tests)
    finally:
        target.write_text(original)
    if code == 1:
        return "caught"
    return "SURVIVED" if code == 0 else f"error {code}"


def main(argv: list[str]) -> int:
    if any(a.startswith("-") for a in argv):
        print(__doc__)
        return 0
    chosen = [m for m in MUTANTS if not argv or any(a in m.name for a in argv)]
    if not chosen:  # else the control would run every test with no mutant to check
        print(f"no mutant's name contains any of {argv}; names: {', '.join(m.name for m in MUTANTS)}")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "tree"
        skip = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", ".ruff_cache", ".mypy_cache")
        shutil.copytree(ROOT, work, ignore=skip)
        control = tuple(sorted({t for m in chosen for t in m.tests}))
        # a mutant only counts as caught if the tests pass without it
        if _pytest(work, control, show=True) != 0:
            print(f"control failed: the unmutated tree does not pass {', '.join(control)}")
            return 2
        bad = 0
        for m in chosen:
            outcome = run(m, work)
            bad += outcome != "caught"
            print(f"{outcome:>10}  {m.name}  ({', '.join(m.tests)})", flush=True)
    print(f"{len(chosen) - bad} of {len(chosen)} mutants caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
