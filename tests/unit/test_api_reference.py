"""elastimator's `tf.estimator` and `tf.compat.v1.estimator` against tf.estimator 2.15's, name by name.

`tests/compat_programs/api_tf215.json` was recorded from tensorflow-cpu 2.15.1 + tensorflow-estimator 2.15.0
(`record_api.py`). For every name elastimator serves: the same kind, the same call signature (names, order,
kinds, defaults, so positional calls bind as they did; elastimator may add keyword-only parameters after
2.15's), and every member 2.15's had, methods with their signatures. Names that are TensorFlow's own objects
in both (the session-run hooks, ModeKeys, VocabInfo) are TensorFlow's to keep.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastimator.compat import api
from tests.compat_programs import api_surface

REFERENCE = json.loads((Path(__file__).parents[1] / "compat_programs" / "api_tf215.json").read_text())
ANY_CALL = [["args", "VAR_POSITIONAL", None], ["kwargs", "VAR_KEYWORD", None]]
"""An abstract class without an __init__ of its own (Head, Exporter, ExportOutput): any signature does."""

RAISED_IN_V2 = {"export_savedmodel"}
"""Members 2.15's v2 estimators had as properties that raised AttributeError ("deprecated, use
export_saved_model"): elastimator's estimators are one class in both namespaces and keep the v1 method."""
_DATA = {"property", "field", "attribute"}
_METHODS = {"method", "classmethod", "staticmethod"}


@pytest.fixture(scope="module")
def ours() -> dict:
    modules = api.public_modules()
    return api_surface.surface({"tf.estimator": modules["v2"], "tf.compat.v1.estimator": modules["v1"]})


def _checked_names(ours: dict) -> list[str]:
    return sorted(name for name in REFERENCE["api"] if name in ours
                  and not (ours[name].get("home") or "").startswith("tensorflow."))


def signature_problem(reference, got) -> str | None:
    """Why `got` does not bind calls as `reference` did, or None."""
    if reference is None or reference == ANY_CALL:
        return None
    if got is None:
        return "has no signature"
    if got[:len(reference)] != reference:
        return f"takes {_text(got)}; 2.15 took {_text(reference)}"
    extra = got[len(reference):]
    if any(kind != "KEYWORD_ONLY" for _, kind, _ in extra):
        return f"adds {[name for name, _, _ in extra]} after 2.15's parameters; extras must be keyword-only"
    return None


def _text(signature) -> str:
    marks = {"POSITIONAL_OR_KEYWORD": "", "KEYWORD_ONLY": "kw:", "VAR_POSITIONAL": "*", "VAR_KEYWORD": "**",
             "POSITIONAL_ONLY": "po:"}
    return "(" + ", ".join(f"{marks[kind]}{name}" + ("" if default is None else f"={default}")
                           for name, kind, default in signature) + ")"


def member_problems(name: str, reference: dict, got: dict) -> list[str]:
    problems = []
    for member, expected in reference["members"].items():
        found = got["members"].get(member)
        where = f"{name}.{member}"
        if member in RAISED_IN_V2 and expected["kind"] == "property":
            continue
        if found is None:
            problems.append(f"{where} is missing ({expected['kind']})")
        elif expected["kind"] in _METHODS:
            if found["kind"] not in _METHODS:
                problems.append(f"{where} is a {found['kind']}; 2.15's was a {expected['kind']}")
            elif problem := signature_problem(expected.get("signature"), found.get("signature")):
                problems.append(f"{where} {problem}")
        elif expected["kind"] in _DATA and found["kind"] not in _DATA:
            problems.append(f"{where} is a {found['kind']}; 2.15's was data ({expected['kind']})")
        elif "value" in expected and found.get("value", expected["value"]) != expected["value"]:
            problems.append(f"{where} is {found.get('value')!r}; 2.15's was {expected['value']!r}")
    return problems


def test_every_public_name_of_2_15_is_served(ours):
    missing = sorted(name for name in REFERENCE["api"] if name not in ours)
    assert not missing


def test_each_name_has_2_15s_kind_signature_and_members(ours):
    problems = []
    for name in _checked_names(ours):
        reference, got = REFERENCE["api"][name], ours[name]
        if reference["kind"] != got["kind"]:
            problems.append(f"{name} is a {got['kind']}; 2.15's was a {reference['kind']}")
            continue
        if problem := signature_problem(reference.get("signature"), got.get("signature")):
            problems.append(f"{name} {problem}")
        if reference["kind"] == "class":
            problems += member_problems(name, reference, got)
    assert not problems, "\n".join(problems)


def test_the_comparison_catches_a_shifted_positional_parameter():
    reference = [["head", "POSITIONAL_OR_KEYWORD", None], ["model_dir", "POSITIONAL_OR_KEYWORD", "None"],
                 ["config", "POSITIONAL_OR_KEYWORD", "None"]]
    shifted = [reference[0], ["warm_start_from", "POSITIONAL_OR_KEYWORD", "None"], *reference[1:]]
    appended = [*reference, ["warm_start_from", "POSITIONAL_OR_KEYWORD", "None"]]
    keyword_only = [*reference, ["warm_start_from", "KEYWORD_ONLY", "None"]]
    assert "2.15 took (head, model_dir=None, config=None)" in signature_problem(reference, shifted)
    assert "must be keyword-only" in signature_problem(reference, appended)
    assert signature_problem(reference, keyword_only) is None


def test_positional_calls_bind_as_in_2_15(tmp_path):
    import elastimator as est  # pylint: disable=import-outside-toplevel

    assert est.RunConfig(str(tmp_path), 7).tf_random_seed == 7
    settings = est.WarmStartSettings(str(tmp_path), "dense.*")
    assert settings.vars_to_warm_start == "dense.*" and settings._asdict()["var_name_to_vocab_info"] == {}
    head = est.BinaryClassHead("weight", [0.3], None, "sum", None, "ctr")
    assert head.name == "ctr" and head.loss_reduction == "sum"
    spec = est.EvalSpec(lambda: None, 5, "holdout")
    assert (spec.steps, spec.name, spec.hooks, spec.exporters) == (5, "holdout", (), ())
    assert isinstance(spec, tuple) and est.TrainSpec(lambda: None, 10)._replace(max_steps=20).max_steps == 20
