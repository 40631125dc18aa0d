"""The compact trace `seakr demo` / `seakr ask` print: what a step's U column says."""

from seakr.methods.trace import Answer


def _answer(steps):
    full = [{"index": i, "pseudo": "", "u": None, "threshold": None, "retrieved": False, "query": "", "kept": None,
             "text": "", **s} for i, s in enumerate(steps)]
    return Answer("q?", "a", "m", {"steps": full, "final": {}, "totals": {"model_calls": 1, "retrievals": 1,
                                                                         "seconds": {"total": 1.0}}}, {})


def test_the_u_column_tells_an_uncertain_step_from_an_unscored_one():
    lines = _answer([
        {"pseudo": "Kubrick was born", "u": -1.49, "threshold": -3.96, "retrieved": True, "query": "Kubrick"},
        {"pseudo": "It is", "u": None, "threshold": -3.96, "retrieved": True, "query": "x"},  # every sample failed
        {"pseudo": "", "u": None, "threshold": -3.96, "retrieved": True, "query": "y"},  # empty pseudo-step: U=+inf
        {"pseudo": "", "u": None, "threshold": None},  # a method that scores no steps (IRCoT, CoT)
        {"pseudo": "He was", "u": None, "threshold": None, "retrieved": True, "query": "z"},  # past a check
    ]).summary().splitlines()
    assert lines[1].startswith("  1. U=-1.49 vs -3.96 RETRIEVE q='Kubrick'")
    assert lines[3].startswith("  2. U=inf vs -3.96 RETRIEVE")
    assert lines[5].startswith("  3. U=inf vs -3.96 RETRIEVE q='y'")
    assert lines[7].startswith("  4. U=- no-retr.")
    assert lines[9].startswith("  5. U=- RETRIEVE q='z'")


def test_a_step_that_decided_to_retrieve_and_found_nothing_new_says_so():
    """SeaKR's step whose search found no new passage (the chain stops there) read "no-retr.", as if the gate had
    declined: it decided to retrieve, with its query, and the note says what came of it."""
    lines = _answer([
        {"pseudo": "Hamlet was", "u": 0.18, "threshold": -100.0, "query": "Hamlet written", "note": "no new passage: stop"},
        {"pseudo": "", "u": None, "threshold": -3.96, "query": "y", "note": "repeated query: stop"},
    ]).summary().splitlines()
    assert lines[1] == "  1. U=0.18 vs -100.00 RETRIEVE q='Hamlet written' (no new passage: stop)"
    assert lines[3] == "  2. U=inf vs -3.96 RETRIEVE q='y' (repeated query: stop)"


def test_the_final_line_shows_what_the_rule_compared():
    """A probe's or a calibrated choice compares P(correct) (the answers were not sampled: no U); the
    paper's rule compares U; a rule that takes one form's answer compares nothing; the check before the chain shows
    its P(correct), not its probe score."""
    a = _answer([])
    a.trace["final"] = {"choice": "knowledge", "candidates": {
        "rationale": {"answer": "Bizet", "u": None, "p": 0.12}, "knowledge": {"answer": "Verdi", "u": None, "p": 0.4},
        "check": {"answer": "John", "u": 0.95, "p": 0.05, "gate_p": 0.31}}}
    final = a.summary().splitlines()[-2]
    assert final == ("  final: rationale 'Bizet' (P(correct)=0.12) | knowledge 'Verdi' (P(correct)=0.40) | "
                     "check 'John' (P(correct)=0.05) -> knowledge")
    a.trace["final"]["candidates"] = {"rationale": {"answer": "Bizet", "u": -4.2}, "knowledge": {"answer": "", "u": None}}
    assert a.summary().splitlines()[-2] == "  final: rationale 'Bizet' (U=-4.20) | knowledge '' (U=inf) -> knowledge"
    # a rule that takes one form's answer (reasoning=knowledge) scored none: no U is shown as if it were infinite
    a.trace["final"] = {"choice": "knowledge", "rule": "knowledge", "scored": False, "candidates": {
        "knowledge": {"answer": "2,415,266", "u": None}, "check": {"answer": "1,500,000", "u": 0.97, "p": 0.03}}}
    assert a.summary().splitlines()[-2] == ("  final: knowledge '2,415,266' (unscored) | check '1,500,000' "
                                            "(P(correct)=0.03) -> knowledge")


def test_the_last_line_says_how_many_searches_found_nothing():
    """An index of other passages: "2 retrievals" read as if passages had been read."""
    a = _answer([])
    assert a.summary().splitlines()[-1] == "A: a   [1 model calls, 1 retrievals, 1.0 s]"  # a trace before the count
    a.trace["totals"].update(retrievals=2, empty_retrievals=2)
    assert a.summary().splitlines()[-1] == "A: a   [1 model calls, 2 retrievals (2 found nothing), 1.0 s]"
