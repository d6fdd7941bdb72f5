"""Private mode with a model trustlab fits: the model is trained with DP-SGD on the same ledger."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from trustlab.audit import Audit
from trustlab.audit._private_model import PublicEncoder
from trustlab.audit.audit import TRAINING_SHARE
from trustlab.cli import app
from trustlab.datasets import Schema, load_default
from trustlab.errors import DataError, ParameterError

pytest.importorskip("torch")
SENS = ["sex", "nwhite"]


@pytest.fixture(scope="module")
def benefits():
    return load_default()


@pytest.fixture(scope="module")
def report(benefits):
    frame, info, schema = benefits
    return Audit(private=True, epsilon=1.0, schema=schema).run(frame, target=info.target, sensitive=SENS)


def test_training_is_on_the_ledger_and_the_ledger_sums_to_the_spend(report):
    training = [e for e in report.ledger if e.section == "model training"]
    assert len(training) == 1
    line = training[0]
    assert line.delta == 1e-6 and "DP-SGD" in line.description
    # recorded at its whole share; the tight figure of the calibrated noise is at most it
    assert line.epsilon == pytest.approx(TRAINING_SHARE, abs=1e-12)
    assert report.epsilon_spent == pytest.approx(sum(e.epsilon for e in report.ledger), abs=1e-12)
    assert report.epsilon_spent == pytest.approx(1.0, abs=1e-9)
    assert report.meta["delta"] == 1e-6
    assert report.meta["model"] == "DP-SGD logistic regression"
    scope = " ".join(report.meta["privacy_scope"])
    assert "trained by trustlab with DP-SGD" in scope and "treated as public" not in scope


def test_the_tight_epsilon_of_the_run_is_within_its_share(benefits):
    frame, info, schema = benefits
    ctx = Audit(private=True, epsilon=1.0, schema=schema).context(frame, target=info.target, sensitive=SENS)
    tight = ctx.model.classifier.release_.epsilon
    assert TRAINING_SHARE * 0.999 <= tight <= TRAINING_SHARE


def test_held_out_predictions_come_from_the_private_model(report):
    perf = report["performance"].figures["overall"]
    assert 0.0 <= perf["roc_auc"] <= 1.0 and perf["count"] > 0


def test_a_user_model_keeps_the_public_model_scope(benefits):
    frame, info, schema = benefits
    model = Audit(model="logistic").context(frame, target=info.target, sensitive=SENS).model
    rep = Audit(model=model, private=True, epsilon=1.0, schema=schema).run(
        frame, target=info.target, sensitive=SENS
    )
    assert not any(e.section == "model training" for e in rep.ledger)
    assert "treated as public" in " ".join(rep.meta["privacy_scope"])
    assert rep.meta["delta"] == 0.0


def test_public_encoder_reads_only_the_schema():
    schema = Schema.from_dict({"columns": {"a": {"bounds": [0, 10]}, "c": {"categories": ["x", "y"]}}})
    enc = PublicEncoder(schema, ["a", "c", "free"])
    rows = pd.DataFrame({"a": [0, 5, 99, None], "c": ["x", "y", "z", None], "free": [1, 2, 3, 4]})
    one = enc.transform(rows)
    np.testing.assert_array_equal(one, [[-1, 1, 0], [0, 0, 1], [1, 0, 0], [0, 0, 0]])
    assert enc.left_out_ == ["free"] and enc.names_ == ["a", "c=x", "c=y"]


def test_bad_delta(benefits):
    with pytest.raises(ParameterError) as info:
        Audit(private=True, epsilon=1.0, delta=0.5)
    assert info.value.argument == "delta"
    runner = CliRunner()
    res = runner.invoke(app, ["audit", "--private", "--epsilon", "1", "--delta", "0"])
    assert res.exit_code == 2 and "--delta" in res.output and "Traceback" not in res.output


def test_a_schema_describing_no_feature_is_a_public_error():
    """issue 13: private training without public feature bounds names the schema and the fix."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"y": rng.choice(["no", "yes"], 100), "g": rng.choice(["a", "b"], 100), "x": rng.normal(size=100)}
    )
    columns = {"y": {"categories": ["no", "yes"]}, "g": {"categories": ["a", "b"]}}
    schema = Schema.from_dict({"columns": columns})
    with pytest.raises(DataError) as info:
        Audit(private=True, epsilon=1.0, schema=schema).run(frame, target="y", sensitive="g")
    assert info.value.argument == "schema" and "trustlab schema" in str(info.value)


def test_step_size_uses_the_schemas_public_row_estimate(benefits):
    """The DP-SGD divisor comes from the schema's public ``rows`` and the split share, never the data."""
    frame, info, schema = benefits
    assert schema.rows == 4877
    ctx = Audit(private=True, epsilon=1.0, schema=schema).context(frame, target=info.target, sensitive=SENS)
    params = ctx.model.classifier.release_.parameters
    assert params["n_hint"] == round(4877 * 0.7)
    # the same plan whatever the rows: half the table gives the same divisor
    half = Audit(private=True, epsilon=1.0, schema=schema).context(
        frame.iloc[::2], target=info.target, sensitive=SENS
    )
    assert half.model.classifier.release_.parameters["divisor"] == params["divisor"]
    # without an estimate: the trainer's default, and the status line says how to add one
    bare = Schema.from_dict({k: v for k, v in schema.to_dict().items() if k != "rows"})
    ctx = Audit(private=True, epsilon=1.0, schema=bare).context(frame, target=info.target, sensitive=SENS)
    assert ctx.model.classifier.release_.parameters["n_hint"] == 1000


@pytest.mark.parametrize("rows", [0, -3, 2.5, True, "many", 10**16])
def test_schema_rows_must_be_a_positive_whole_number(rows):
    with pytest.raises(DataError) as info:
        Schema.from_dict({"columns": {"a": {"bounds": [0, 1]}}, "rows": rows})
    assert info.value.argument == "schema" and '"rows"' in str(info.value)
