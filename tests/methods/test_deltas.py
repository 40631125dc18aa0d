"""The packaged thresholds: every value is a number for a known estimator, with what it was measured
on, and the lookup reads them (a user's calibration file first)."""

import json
import math
from pathlib import Path

import pytest

from seakr.methods.deltas import default_delta
from seakr.models.registry import REGISTRY
from seakr.uncertainty import ESTIMATORS

DELTAS = Path(__file__).parents[2] / "src" / "seakr" / "methods" / "deltas.json"


def test_every_packaged_threshold_is_a_number_for_a_real_model_with_its_provenance():
    table = json.loads(DELTAS.read_text())
    entries = {k: v for k, v in table.items() if not k.startswith("_")}
    assert entries
    for key, entry in entries.items():
        model, layer, source, *tags = key.split(":")
        assert tags in ([], ["chat"], ["multihop"], ["chat", "multihop"]), key
        assert model in REGISTRY and layer.startswith("L") and layer[1:].isdigit() and source in ("mlp", "residual")
        values = {k: v for k, v in entry.items() if not k.startswith("_")}
        assert values and set(values) <= set(ESTIMATORS), key
        assert all(isinstance(v, float) and math.isfinite(v) for v in values.values()), key
        assert {"delta", "state"} <= set(entry["_provenance"]), key


def test_lookup_reads_the_packaged_value_and_never_the_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))  # no calibration file of the user's
    info = {"model": "qwen2.5-coder-0.5b", "state_layer": 11, "state_source": "mlp"}
    assert default_delta(info, "eigen") == (-1.033, "packaged:qwen2.5-coder-0.5b:L11:mlp")
    with pytest.raises(ValueError, match="no threshold for estimator '_provenance'"):
        default_delta(info, "_provenance")
    assert default_delta({**info, "state_layer": 3}, "eigen")[1] == "paper"
    # a new estimator has no threshold yet: the refusal says how to give one at each door (it said "pass delta=",
    # the Python spelling, to a command-line or HTTP user)
    with pytest.raises(ValueError, match=r"'hidden-score' .*: give one \(delta= in Python, --delta on the command "
                                         r"line, \"delta\" in a request's options\) or run `seakr calibrate`"):
        default_delta(info, "hidden-score")


def test_auto_prompt_style_is_the_packaged_models_measured_one_where_the_model_can_take_it():
    from scripted import ScriptedLM
    from seakr.methods.deltas import default_prompt_style
    from seakr.models.base import CHAT

    class Named(ScriptedLM):
        def __init__(self, model, caps):
            super().__init__(lambda v: None, capabilities=caps)
            self.model = model

        def info(self):
            return {**super().info(), "model": self.model}

    assert REGISTRY["qwen2.5-coder-0.5b"].prompt_style == "chat"
    assert default_prompt_style(Named("qwen2.5-coder-0.5b", ("generate", "states", CHAT))) == "chat"
    assert default_prompt_style(Named("qwen2.5-coder-0.5b", ("generate", "states"))) == "plain"  # no template
    assert default_prompt_style(Named("smollm2-135m", ("generate", "states", CHAT))) == "plain"
    assert default_prompt_style(Named("my-own-folder", ("generate", "states", CHAT))) == "plain"


def test_a_threshold_belongs_to_its_prompt_style(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))
    info = {"model": "smollm2-135m", "state_layer": 14, "state_source": "mlp"}
    assert default_delta(info, "eigen", "plain")[1] == "packaged:smollm2-135m:L14:mlp"
    assert default_delta(info, "eigen", "chat") == (-6.0, "paper")  # plain's value is not chat's
    from seakr.methods.deltas import calibration_path
    assert calibration_path(info, "chat").name == "smollm2-135m-L14-mlp-chat.json"
    assert calibration_path(info).name == "smollm2-135m-L14-mlp.json"


def test_a_threshold_belongs_to_its_mode_and_multihop_falls_back_to_simple_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))
    from seakr.methods.deltas import calibration_path

    info = {"model": "smollm2-135m", "state_layer": 14, "state_source": "mlp"}
    assert calibration_path(info, "chat", "multihop").name == "smollm2-135m-L14-mlp-chat-multihop.json"
    assert calibration_path(info, "plain", "simple") == calibration_path(info)  # simple QA keeps the old names
    # no multi-hop value anywhere: the simple-QA one, and the source says which it is
    assert default_delta(info, "eigen", "plain", "multihop") == (-3.38, "packaged:smollm2-135m:L14:mlp")
    # the user's multi-hop calibration wins for multi-hop only
    p = calibration_path(info, "plain", "multihop")
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps({"delta": {"eigen": -2.5}}))
    assert default_delta(info, "eigen", "plain", "multihop") == (-2.5, str(p))
    assert default_delta(info, "eigen", "plain", "simple")[0] == -3.38
    with pytest.raises(ValueError, match="mode must be one of simple, multihop, not 'multi'"):
        default_delta(info, "eigen", "plain", "multi")


def test_a_damaged_threshold_file_of_the_users_is_named_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))
    from seakr.methods.deltas import calibration_path

    info = {"model": "smollm2-135m", "state_layer": 14, "state_source": "mlp"}
    p = calibration_path(info)
    p.parent.mkdir(parents=True)
    for text, needle in (('{"delta": {"eigen": -2.5,}}', ":1: invalid JSON"), ('[1, 2]', "not a threshold file"),
                         ('{"delta": {"eigen": "low"}}', "not a threshold file"),
                         ('{"delta": {"eigen": NaN}}', "not a threshold file")):  # U > NaN: never retrieved
        p.write_text(text)
        with pytest.raises(ValueError, match=f"{p.name}{needle}" if needle.startswith(":") else needle):
            default_delta(info, "eigen")


def test_seakr_reads_the_threshold_of_its_own_mode(tmp_path, monkeypatch):
    from scripted import ScriptedLM
    from seakr.methods import SeaKR
    from seakr.methods.deltas import calibration_path

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))
    lm = ScriptedLM(lambda v: None)
    for mode, value in (("simple", -1.5), ("multihop", -0.5)):
        p = calibration_path(lm.info(), "plain", mode)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"delta": {"eigen": value}}))
    for mode, value in (("simple", -1.5), ("multihop", -0.5)):
        m = SeaKR(lm, None, mode=mode, prompt_style="plain")
        assert (m.delta, m.describe()["delta_source"]) == (value, str(calibration_path(lm.info(), "plain", mode)))
