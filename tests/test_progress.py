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
