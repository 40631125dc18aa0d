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
