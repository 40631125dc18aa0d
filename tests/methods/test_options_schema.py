"""One options schema for every door: a value the Python API accepts is accepted by a TOML grid, by
``--option`` and by the service, and the scripted SeaKR answers with it; a value one door refuses, every
door refuses, with one line naming the field. Property-based (Hypothesis) over every ranged option."""

import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripted import Reply, ScriptedLM, engine
from seakr.cli.flags import parse_options
from helpers import HOTPOT
from seakr.cli.args import build_parser
from seakr.cli.commands import plan_from_args
from seakr.eval.specs import PlanError, run_spec
from seakr.methods import METHODS
from seakr.common.schema import numbers

CONFIGS = {name: METHODS[name].Config for name in ("seakr", "flare", "dragin")}
FIELDS = sorted({(m, f) for m, c in CONFIGS.items() for f in numbers(c)})


def near(ends: tuple):
    """Values around a range's ends and beyond, of every JSON number type."""
    ends = [x[0] for x in ends if x is not None]
    edge = st.sampled_from([e + d for e in ends for d in (-1, -0.5, -1e-9, 0, 1e-9, 0.5, 1)] or [0])
    return st.one_of(edge, st.integers(-3, 12), st.floats(allow_nan=True, allow_infinity=True, width=32),
                     st.sampled_from([2 ** 32, 2 ** 40, -(2 ** 31), 10 ** 400, -(10 ** 400), 2.5, True, None, "3"]))


def through_the_api(method, name, v):
    try:
        CONFIGS[method].from_dict({name: v})
        return None
    except (ValueError, TypeError) as e:
        return str(e)


def through_a_grid(tmp_path, method, name, v):
    import json

    if v is None:  # TOML has no null: leaving the key out is how a grid says it
        return "not expressible"
    toml = tmp_path / "grid.toml"
    lit = json.dumps(v) if not isinstance(v, float) or math.isfinite(v) else \
        ("nan" if math.isnan(v) else "inf" if v > 0 else "-inf")  # TOML's spellings (NaN is not "-inf")
    toml.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "o"}"\n'
                    f'[[run]]\nmethod = "{method}"\noptions = {{ {name} = {lit} }}\n')
    try:
        plan_from_args(build_parser().parse_args(["eval", "--config", str(toml)]))
        return None
    except PlanError as e:  # the plan knows its model's window; a config alone does not
        return "window" if "leaves no room for a prompt in the model's" in str(e) else str(e)


def through_the_flag(method, name, v):
    import json

    text = json.dumps(v) if not isinstance(v, float) or math.isfinite(v) else \
        ("NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity")
    try:
        run_spec("--option", method, parse_options([f"{name}={text}"]))
        return None
    except PlanError as e:
        return str(e)


def through_the_service(method, name, v):
    from seakr.serve.app import LIMITS, AnswerRequest, AnswerService  # noqa: F401

    svc = AnswerService(ScriptedLM(lambda view: Reply("x")), None)
    try:
        svc.build(AnswerRequest(question="q", method=method, options={name: v}))
        return None
    except Exception as e:  # a body's validation error naming the option, or a budget's 422 with the reason
        detail = e.errors()[0]["msg"] if hasattr(e, "errors") else str(getattr(e, "detail", e))
        # a server cap: a per-option limit, or the request's worst-case budget (rows, work, attention cache),
        # which a large enough value of several options (n_candidates, k, max_steps, ...) exceeds
        capped = (name in LIMITS and "on this server" in detail) or "this server allows" in detail
        return "server cap" if capped else detail


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_door_gives_the_same_verdict_naming_the_field(tmp_path, data):
    method, name = data.draw(st.sampled_from(FIELDS))
    v = data.draw(near(numbers(CONFIGS[method])[name]))
    api = through_the_api(method, name, v)
    doors = {"grid": through_a_grid(tmp_path, method, name, v), "flag": through_the_flag(method, name, v),
             "service": through_the_service(method, name, v)}
    for door, verdict in doors.items():
        if verdict in ("server cap", "window"):  # a server's cap or a model's window may refuse what the schema
            assert api is None  # allows, never allow what it refuses
            continue
        if door == "service" and api is None and verdict is not None and "reads estimator" in verdict:
            # the server's model settles the "auto" decisions (this one has no probes: the paper's U), and k or
            # temperature leaves that U nothing to measure; the Python API refuses the same method (below)
            assert name in ("k", "temperature") and f"option {name}" in verdict and "\n" not in verdict
            continue
        if verdict == "not expressible":
            continue
        assert (verdict is None) == (api is None), (door, name, v, api, verdict)
        if verdict is not None:
            assert f"option {name}" in verdict and "\n" not in verdict, (door, verdict)


def test_a_grid_door_holds_a_length_to_its_model_s_window(tmp_path):
    """The grid door checks the plan, which knows the model's window; the options alone do not."""
    assert through_a_grid(tmp_path, "dragin", "answer_tokens", 32768) == "window"
    assert through_a_grid(tmp_path, "dragin", "answer_tokens", 64) is None
    assert through_the_api("dragin", "answer_tokens", 32768) is None


@pytest.mark.parametrize("method,name", FIELDS)
def test_a_number_of_thousands_of_digits_is_refused_naming_the_option(method, name):
    """From Python, delta=10**5000 passed the schema and failed at the model ("int too large to convert to
    float"), and a refusal that quoted such a number raised Python's own "Exceeds the limit (4300 digits) ...
    use sys.set_int_max_str_digits()" instead of naming the option."""
    for v in (10 ** 5000, -(10 ** 5000)):
        verdict = through_the_api(method, name, v)
        if verdict is not None:  # an int option without an upper bound takes it (the server caps it; memory refuses it)
            assert verdict.startswith(f"option {name}: ") and "sys.set_int" not in verdict and len(verdict) < 200
        else:
            assert numbers(CONFIGS[method])[name][1] is None and v > 0


@pytest.fixture(scope="module")
def idx(tmp_path_factory):
    return engine(tmp_path_factory.mktemp("schema"), {"Kubrick": "Stanley Kubrick was an American director."})


CHEAP = {"k": st.integers(0, 6), "max_steps": st.integers(1, 3), "max_passages": st.integers(1, 3),
         "n_candidates": st.integers(1, 3), "max_new_tokens": st.integers(1, 40), "n_shot": st.integers(0, 4),
         "top_k": st.integers(1, 60), "top_p": st.floats(1e-6, 1.0), "temperature": st.floats(0, 5),
         "seed": st.integers(0, 2 ** 32 - 1), "alpha": st.floats(1e-9, 10), "keep_p": st.floats(0, 1),
         "rerank_z": st.floats(0, 10), "delta": st.floats(allow_nan=False), "query_max_words": st.integers(1, 8)}


@settings(max_examples=40, deadline=None)
@given(opts=st.fixed_dictionaries({}, optional=CHEAP))
def test_every_accepted_combination_answers(idx, opts):
    from seakr.methods import SeaKR

    def script(v):
        return Reply("So the answer is American" if v.passages else "Kubrick directed it", 1.0)
    try:
        m = SeaKR(ScriptedLM(script), idx, **opts)
    except ValueError as e:  # the one combination refused: a sample-based U with nothing to measure
        assert (opts.get("k", 20) < 2 or opts.get("temperature") == 0) and "\n" not in str(e), e
        return
    a = m.answer("Who directed 2001: A Space Odyssey?")
    assert isinstance(a.answer, str) and a.trace["final"]["choice"]


def test_the_servers_defaults_reach_each_method_that_has_them():
    """`seakr serve --option gate=step --option k=4`: every request for another method was a 422 "unknown
    option 'gate'" that its client had not sent; k, an option of every method, still reaches them all."""
    from seakr.serve.app import AnswerRequest, AnswerService

    svc = AnswerService(ScriptedLM(lambda view: Reply("x")), None, "seakr", {"gate": "step", "k": 4, "max_steps": 2})
    for method in METHODS:
        m = svc.build(AnswerRequest(question="q", method=method))
        assert m.config.k == 4, method
        assert getattr(m.config, "gate", "step") == "step" and getattr(m.config, "max_steps", 2) == 2, method
    with pytest.raises(Exception) as e:  # what a client sends itself is still checked against its method
        svc.build(AnswerRequest(question="q", method="cot", options={"max_steps": 0}))
    assert e.value.errors()[0]["loc"] == ("body", "options", "max_steps")
    with pytest.raises(Exception) as e:  # and a name no method has is refused with the nearest one
        svc.build(AnswerRequest(question="q", method="cot", options={"gaet": "step"}))
    assert e.value.errors()[0]["loc"] == ("body", "options", "gaet") and "did you mean 'gate'" in str(e.value)


def test_another_methods_option_is_said_not_refused_at_every_door(capsys):
    """`--option gate=probe` looped over seakr, ircot and cot stopped at cot ("unknown option 'gate'"), as did a
    grid's or a request's: an option of another method is kept aside and said as not read, through the one schema
    every door converts into; a name no method has is still refused with the nearest one."""
    from seakr.methods import CoT
    from seakr.serve.app import AnswerRequest, AnswerService

    why = "an option of seakr, which cot does not read"
    run = run_spec("--option", "cot", {"gate": "probe", "k": 3})  # the flags' and a grid's door
    assert run.config.others == {"gate": "probe"} and "gate" not in run.config.to_dict()
    assert run.config.replace(k=4).others == {"gate": "probe"}  # settling a config keeps what it was given
    m = CoT(ScriptedLM(lambda view: Reply("x")), None, gate="probe", k=3)  # Python
    assert m.unread() == [("k", "cot decodes greedily and draws no samples (SeaKR reads it)"), ("gate", why)]
    assert "gate='probe' is not read: " + why in capsys.readouterr().err
    svc = AnswerService(ScriptedLM(lambda view: Reply("x")), None, "seakr")  # HTTP
    m = svc.build(AnswerRequest(question="q", method="cot", options={"gate": "step"}))
    assert svc.public(m.answer("q"), m)["config"]["unread_options"] == {"gate": why}
    with pytest.raises(PlanError, match=re.escape("'gaet' (did you mean 'gate', an option of seakr?)")):
        run_spec("--option", "cot", {"gaet": "probe"})


def test_the_servers_own_defaults_are_held_to_what_a_request_may_ask():
    """A server's defaults ride in every request: one past a request's limit would refuse each of them."""
    from seakr.serve.app import AnswerService
    from seakr.serve.schema import OptionRefused

    with pytest.raises(OptionRefused, match=r"^option k: at most 64 on this server, got 100$") as e:
        AnswerService(ScriptedLM(lambda view: Reply("x")), None, "seakr", {"k": 100})
    assert e.value.field == "k"
    with pytest.raises(OptionRefused, match=r"^unknown option\(s\) 'gaet' \(did you mean 'gate'") as e:  # no method's
        AnswerService(ScriptedLM(lambda view: Reply("x")), None, "cot", {"gaet": "step"})
    assert AnswerService(ScriptedLM(lambda view: Reply("x")), None, "ircot", {"k": 4}).build_default().config.k == 4


@pytest.mark.parametrize("key,near,flag", [("threads", None, "--threads"), ("thread", "threads", "--threads"),
                                           ("layer", None, "--layer"), ("precision", None, "--precision")])
def test_a_model_option_given_as_a_method_option_says_where_it_goes(key, near, flag):
    """`--option threads=2` (a grid run's options, a request's) was "did you mean 'theta', an option of flare?",
    `--option layer=3` the list of the method's options: they say how the model loads, where each door sets it."""
    said = (f"did you mean {near!r}? " if near else "") + f"how the model loads, not a method option: {flag} on"
    for C in CONFIGS.values():
        with pytest.raises(ValueError, match=re.escape(f"unknown option(s) {key!r} ({said}")):
            C.from_dict({key: 2})


@pytest.mark.parametrize("key,near", [("exact_logits", None), ("exact_logit", "exact_logits"), ("draft_tokens", None)])
def test_a_loading_knob_only_python_sets_is_named_as_one(key, near):
    """A knob of ``load_model`` with no flag (``exact_logits``, ``draft_tokens``) given as a method option is said to
    be one, and where it is set, as the flagged ones are."""
    said = (f"did you mean {near!r}? " if near else "") + f"how the model loads, not a method option: {near or key}= "
    for C in CONFIGS.values():
        with pytest.raises(ValueError, match=re.escape(f"unknown option(s) {key!r} ({said}in Python)")):
            C.from_dict({key: 2})


def test_inf_spells_infinity_for_number_options_only():
    """JSON has no infinity, so "-inf" spells it for a number option; a text option keeps its text (the
    service told prompt_set="inf" "expected str, got inf", not that no such set exists)."""
    C = METHODS["seakr"].Config
    assert C.from_dict({"delta": "-inf"}).delta == -math.inf and C.from_dict({"gate_p": None}).gate_p is None
    with pytest.raises(ValueError, match=r"unknown prompt set 'inf'|prompt_set.*'inf'"):
        C.from_dict({"prompt_set": "inf"})
    assert C.from_dict({"marker": "-inf"}).marker == "-inf"
    # as float() reads it on the command line: a request's or a grid's "-Inf" was "expected a number or null"
    for text, v in (("-Inf", -math.inf), ("Infinity", math.inf), ("+inf", math.inf), (" -INFINITY ", -math.inf)):
        assert C.from_dict({"delta": text}).delta == v, text
    with pytest.raises(ValueError, match=re.escape("option delta: expected a number (inf and -inf allowed) or null, got '--inf'")):
        C.from_dict({"delta": "--inf"})


def test_an_option_in_other_case_is_pointed_to_its_name():
    """``{"K": 5}`` (a request's, a grid's, ``--option K=5``) listed every option: 'K' is too short for letters in
    common to find k."""
    for C in CONFIGS.values():
        with pytest.raises(ValueError, match=re.escape("unknown option(s) 'K' (did you mean 'k'?)")):
            C.from_dict({"K": 5})
        with pytest.raises(ValueError, match=re.escape("unknown option(s) 'Max-Steps' (did you mean 'max_steps'?)")):
            C.from_dict({"Max-Steps": 2})


@pytest.mark.parametrize("given", [None, [], ["k", 5], "k=5", 5])
def test_options_that_are_not_a_dict_are_named_by_their_type(given):
    """``Config.from_dict([])`` was "'list' object has no attribute 'items'", ``from_dict(None)`` "not iterable"."""
    for method, C in CONFIGS.items():
        with pytest.raises(TypeError, match=rf"^{C.__name__}\.from_dict: expected a dict of options, got {type(given).__name__}$"):
            C.from_dict(given)


def test_a_path_option_takes_a_pathlib_path_and_keeps_text(tmp_path):
    """Python code names files with ``pathlib.Path``: ``prompt_set=Path(...)`` and ``probes=Path(...)`` were
    "expected str, got PosixPath" at every Python door (``SeaKR(...)``, ``from_config``, a plan's ``RunSpec``)."""
    import json
    from pathlib import Path

    demos = Path(__file__).resolve().parents[2] / "src" / "seakr" / "prompts" / "data" / "hotpotqa.json"
    cfg = METHODS["seakr"].Config.from_dict({"prompt_set": demos, "probes": tmp_path})
    assert (cfg.prompt_set, cfg.probes) == (str(demos), str(tmp_path)) and {"prompt_set", "probes"} <= set(cfg.to_dict())
    json.dumps(cfg.to_dict())  # a run's config.json
    run_spec("run 1", "ircot", {"prompt_set": demos})
    with pytest.raises(PlanError, match="option k: expected"):  # only the path options: a Path is no number
        run_spec("run 1", "seakr", {"k": Path("5")})


def test_numpy_scalars_from_a_sweep_are_taken_as_python_numbers():
    """``for k in np.arange(2, 21, 2): SeaKR(..., k=k)`` was "expected int, got np.int64(2)", and a float32 delta
    "expected a number or null": a NumPy scalar (or a 0-d array) is read as Python's own, so configs stay JSON."""
    import json

    import numpy as np

    cfg = METHODS["seakr"].Config.from_dict({"k": np.int64(4), "delta": np.float32(-3.5), "max_steps": np.int32(2),
                                              "gate_p": np.float16(0.5), "seed": np.uint32(7),
                                              "retrieval": np.str_("always"), "alpha": np.array(1e-3)})
    assert (cfg.k, cfg.delta, cfg.max_steps, cfg.gate_p, cfg.seed) == (4, -3.5, 2, 0.5, 7)
    assert type(cfg.k) is int and type(cfg.delta) is float and cfg.retrieval == "always"
    json.dumps(cfg.to_dict())
    with pytest.raises(ValueError, match=re.escape("option k: expected a whole number in [0, inf), got 2.5")):  # a numpy value is no looser
        METHODS["seakr"].Config.from_dict({"k": np.float64(2.5)})


def test_a_whole_number_option_takes_an_integral_float_from_any_door():
    """16.0 (a JSON body), 1e3 (--option) and np.float64(2.0) (a sweep) were refused for whole-number options."""
    import numpy as np

    c = CONFIGS["seakr"].from_dict({"k": 16.0, "max_steps": 1e3, "n_shot": np.float64(2.0)})
    assert (c.k, c.max_steps, c.n_shot) == (16, 1000, 2) and all(type(v) is int for v in (c.k, c.max_steps, c.n_shot))
    assert CONFIGS["seakr"].from_dict(parse_options(["k=1e1"])).k == 10
    with pytest.raises(ValueError, match=re.escape("option k: expected a whole number in [0, inf), got 2.5")):
        CONFIGS["seakr"].from_dict({"k": 2.5})
