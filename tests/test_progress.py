"""The live line an answer in progress shows (``seakr ask`` / ``seakr demo``): what each event says, in
place on a terminal, one line per decision elsewhere."""

import io

from seakr.progress import LiveLine


class Term(io.StringIO):
    def isatty(self):
        return True


EVENTS = [
    {"type": "step_started", "index": 0},
    {"type": "model_call", "purpose": "pseudo-step", "greedy": "Kubrick was born in New York", "u": -4.25},
    {"type": "decision", "what": "retrieve", "step": 0, "u": -4.25, "delta": -5.0},
    {"type": "retrieval", "query": "Kubrick", "hits": [{"id": "a"}, {"id": "b"}]},
    {"type": "decision", "what": "no-retrieve", "step": -1, "u": -6.1, "p_correct": 0.72, "gate_p": 0.5},
    {"type": "decision", "what": "retrieve", "step": 1, "u": None, "delta": -5.0},
    {"type": "decision", "what": "retrieve", "step": 0, "u": None, "delta": None, "rule": "gate=probe"},
]


def test_each_event_says_what_happens():
    said = [LiveLine.describe(e) for e in EVENTS]
    assert said[0] is None
    assert said[1] == "pseudo-step: Kubrick was born in New York (U=-4.25)"
    assert said[2] == "step 1: U=-4.25 vs delta -5.00 -> retrieve"
    assert said[3] == "search 'Kubrick': 2 passages"
    assert said[4] == "check: P(correct)=0.72 vs 0.50 -> no-retrieve"
    assert said[5] == "step 2: U=inf vs delta -5.00 -> retrieve"
    assert said[6] == "step 1: gate=probe -> retrieve"  # past a knowledge check: no U, no delta


def test_a_log_gets_decisions_a_terminal_gets_one_line_rewritten():
    log, term = io.StringIO(), Term()
    for out in (log, term):
        live = LiveLine(out)
        for e in EVENTS:
            live(e)
        live.close()
    assert len(log.getvalue().splitlines()) == 5 and "pseudo-step" not in log.getvalue()  # no model calls in a log
    assert "\n" not in term.getvalue() and term.getvalue().count("\r\033[K") == 7  # 6 lines in place + the clear


def test_a_plan_draws_no_bar_on_stdout_nor_where_nothing_shows_it(tmp_path, capsys):
    """The pooling's and each run's rich bar went to stdout, drawn even where no terminal could show it:
    ``seakr eval ... > table.md`` wrote two bar lines above the table. A bar is drawn on stderr, on a terminal
    only; elsewhere a plain line every ~10 % goes to stderr."""
    from helpers import HOTPOT
    from scripted import Reply, ScriptedLM
    from seakr.eval.plan import EvalPlan, run_plan
    from seakr.eval.specs import RunSpec

    lm = ScriptedLM(lambda v: Reply("Paris. So the answer is Paris."))
    run_plan(EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=[RunSpec("ircot", {"max_steps": 1})], limit=2), lm,
             progress=True, say=lambda _m: None)
    out, err = capsys.readouterr()
    assert out == "" and "━" not in err and "ircot: 1/2" in err


def test_on_a_terminal_the_bar_is_drawn_on_stderr(monkeypatch):
    from seakr.progress import progress_bar

    term, out = Term(), io.StringIO()
    monkeypatch.setattr("sys.stderr", term)
    monkeypatch.setattr("sys.stdout", out)
    with progress_bar("indexing", total=3) as adv:
        adv(3)
    assert "indexing" in term.getvalue() and "3/3" in term.getvalue() and out.getvalue() == ""
