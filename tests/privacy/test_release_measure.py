"""Privacy semantics as types: a Release's measure and sensitivity, and cost checked before noise.

- A :class:`Release` states its privacy measure (``PrivacyMeasure``) and sensitivity as
  typed fields; the :class:`Accountant` composes by the measure and never reads the
  mechanism's name.
- A mechanism given ``accountant=`` checks its planned cost before drawing any noise:
  with an exhausted budget it raises :class:`BudgetExceededError` and no sampler is
  touched (the samplers are replaced by counters here).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant

from trustlab.errors import BudgetExceededError, ParameterError
from trustlab.privacy import (
    Accountant,
    Release,
    dp_bounds,
    dp_count,
    dp_histogram,
    dp_mean,
    dp_quantile,
    dp_quantiles,
    dp_sum,
    unbounded_quantile,
)
from trustlab.privacy import _selection as selection_module
from trustlab.privacy import samplers as samplers_module
from trustlab.privacy.release import PrivacyMeasure

X = np.linspace(0.0, 10.0, 101)


def test_measure_defaults_and_typed_fields():
    assert Release(1, 0.5).measure is PrivacyMeasure.PURE
    assert Release(1, 0.5, 1e-6).measure is PrivacyMeasure.APPROXIMATE
    g = Release(0.0, 1.0, 1e-6, measure="gaussian", sensitivity=2.0, noise_scale=8.0)
    assert g.measure is PrivacyMeasure.GAUSSIAN and g.noise_multiplier == 4.0
    meta = g.to_dict()
    assert meta["measure"] == "gaussian" and meta["sensitivity"] == 2.0 and meta["noise_scale"] == 8.0
    r = dp_count(10, 0.5)
    assert (r.measure, r.sensitivity, r.noise_scale) == (PrivacyMeasure.PURE, 1.0, 2.0)
    s = dp_sum(X, (0.0, 10.0), 0.5)
    assert s.sensitivity == 10.0 and s.noise_scale == 20.0
    assert dp_quantiles(X, [0.25, 0.75], 1.0, (0.0, 10.0)).sensitivity == 2.0


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"measure": "renyi"}, "measure"),
        ({"measure": "gaussian", "noise_scale": 1.0}, "sensitivity"),
        ({"measure": "gaussian", "sensitivity": 1.0}, "noise_scale"),
        ({"measure": "zCDP"}, "rho"),
        ({"measure": "pure", "delta": 1e-6}, "measure"),
        ({"sensitivity": -1.0}, "sensitivity"),
        ({"noise_scale": float("nan")}, "noise_scale"),
        ({"rho": True}, "rho"),
    ],
)
def test_bad_measure_fields_are_refused(kwargs, argument):
    delta = kwargs.pop("delta", 0.0)
    with pytest.raises(ParameterError) as info:
        Release(0.0, 1.0, delta, **kwargs)
    assert info.value.argument == argument


def test_accountant_composes_by_measure_not_by_mechanism_name(monkeypatch):
    # Named "Gaussian" but approximate (a grid Gaussian): charged by its (epsilon, delta).
    acc = Accountant(3.0, 1e-5, composition="rdp")

    def refuse(*args, **kwargs):
        raise AssertionError("charged as a continuous Gaussian")

    monkeypatch.setattr(acc, "spend_gaussian", refuse)
    acc.record(Release(0.0, 0.5, 1e-6, "discrete Gaussian", {"sigma": 4.0, "sensitivity": 1.0}, "x"))
    assert acc.spent_epsilon == pytest.approx(0.5)
    # Named "Laplace" but measured as a Gaussian: charged by its noise multiplier.
    acc = Accountant(3.0, 1e-5, composition="rdp")
    acc.record(
        Release(0.0, 9.0, 1e-6, "Laplace?", {}, "y", measure="gaussian", sensitivity=1.0, noise_scale=4.0)
    )
    ref = RdpAccountant()
    ref.compose(dp_event.GaussianDpEvent(4.0))
    assert acc.spent_epsilon == pytest.approx(ref.get_epsilon(1e-5), rel=1e-6)
    # zCDP by its rho, under zcdp composition.
    acc = Accountant(3.0, 1e-5, composition="zcdp")
    acc.record(Release(0.0, 9.0, 1e-6, "", {}, "z", measure="zCDP", rho=0.125))
    twin = Accountant(3.0, 1e-5, composition="zcdp")
    twin.spend_zcdp(0.125, description="z")
    assert acc.spent_epsilon == pytest.approx(twin.spent_epsilon)


@pytest.mark.parametrize("composition", ["basic", "rdp", "zcdp", "pld"])
def test_check_charges_nothing_and_agrees_with_record(composition):
    acc = Accountant(1.0, 1e-6, composition=composition)
    plan = [Release(None, 0.4), Release(None, 0.5)]
    acc.check(*plan)
    assert acc.spent_epsilon == 0.0 and acc.ledger() == []
    for rel in plan:
        acc.record(rel)
    with pytest.raises(BudgetExceededError) as info:
        acc.check(Release(None, 0.2))
    assert info.value.argument == "epsilon"
    assert len(acc.ledger()) == 2


class _Counter:
    """Replaces every entry into the secure samplers by a counter."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real_opendp = samplers_module.opendp
        real_urandom = os.urandom
        real_gumbel = selection_module._gumbel_max
        real_measurement = samplers_module._integer_measurement

        def measurement(kind, scale):
            # the built measurement is cached: count each draw through it, not each build
            meas = real_measurement(kind, scale)

            def counted(values):
                self.calls += 1
                return meas(values)

            return counted

        def opendp():
            self.calls += 1
            return real_opendp()

        def gumbel():
            self.calls += 1
            return real_gumbel()

        def urandom(n):
            self.calls += 1
            return real_urandom(n)

        monkeypatch.setattr(samplers_module, "opendp", opendp)
        monkeypatch.setattr(samplers_module, "_integer_measurement", measurement)
        monkeypatch.setattr(selection_module, "opendp", opendp)
        monkeypatch.setattr(selection_module, "_gumbel_max", gumbel)
        monkeypatch.setattr(os, "urandom", urandom)


MECHANISMS = {
    "dp_count": lambda acc: dp_count(100, 0.5, accountant=acc),
    "dp_histogram": lambda acc: dp_histogram([0, 1, 1], 3, 0.5, accountant=acc),
    "dp_sum": lambda acc: dp_sum(X, (0.0, 10.0), 0.5, accountant=acc),
    "dp_sum (private bounds)": lambda acc: dp_sum(X, None, 0.5, n=101, accountant=acc),
    "dp_mean": lambda acc: dp_mean(X, (0.0, 10.0), 0.5, accountant=acc),
    "dp_mean (private bounds)": lambda acc: dp_mean(X, None, 0.5, accountant=acc),
    "dp_quantile": lambda acc: dp_quantile(X, 0.5, 0.5, (0.0, 10.0), accountant=acc),
    "dp_quantiles": lambda acc: dp_quantiles(X, [0.25, 0.75], 0.5, (0.0, 10.0), accountant=acc),
    "dp_quantiles (independent)": lambda acc: dp_quantiles(
        X, [0.25, 0.75], 0.5, (0.0, 10.0), method="independent", accountant=acc
    ),
    "unbounded_quantile": lambda acc: unbounded_quantile(X, 0.5, 0.5, 0.0, accountant=acc),
    "dp_bounds": lambda acc: dp_bounds(X, 0.5, accountant=acc),
}


@pytest.mark.parametrize("name", list(MECHANISMS))
@pytest.mark.parametrize("composition", ["basic", "rdp"])
def test_exhausted_accountant_draws_no_noise(monkeypatch, name, composition):
    acc = Accountant(1.0, 1e-6, composition=composition)
    acc.spend(0.8, description="earlier releases")
    counter = _Counter(monkeypatch)
    with pytest.raises(BudgetExceededError) as info:
        MECHANISMS[name](acc)
    assert info.value.argument == "epsilon"
    assert counter.calls == 0, f"{name} drew noise before checking the budget"
    assert [e.description for e in acc.ledger()] == ["earlier releases"]


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_mechanism_with_budget_charges_exactly_its_epsilon(monkeypatch, name):
    acc = Accountant(1.0)
    counter = _Counter(monkeypatch)
    out = MECHANISMS[name](acc)
    assert counter.calls > 0  # the counter sees the draws it must not see above
    releases = out[1] if isinstance(out, tuple) else [out]
    assert acc.spent_epsilon == pytest.approx(0.5)
    assert [e.description for e in acc.ledger()] == [r.description for r in releases]


def test_accountant_argument_is_type_checked():
    with pytest.raises(ParameterError) as info:
        dp_count(10, 1.0, accountant=1.0)
    assert info.value.argument == "accountant"
