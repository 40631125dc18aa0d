"""The command line's readers of flags and their values: ``--option`` pairs with the hint for another
method's option, and why an estimator reads inf."""

import re

import numpy as np
import pytest

from seakr.eval.specs import PlanError, run_spec


def test_option_pairs_and_the_hint_for_a_misspelled_option():
    from seakr.cli.flags import CLIError, parse_options

    assert parse_options(["k=020", "delta=-inf", "titles=true", "marker=So it is"]) == {
        "k": 20, "delta": "-inf", "titles": True, "marker": "So it is"}
    for bad in ("=3", " =3", "k"):
        with pytest.raises(CLIError, match="--option expects key=value"):
            parse_options([bad])
    for opts, needle in (({"gaet": "check"}, "'gaet' (did you mean 'gate', an option of seakr?)"),
                         ({"dleta": 1}, "'dleta' (did you mean 'delta', an option of seakr?)"),
                         ({"kk": 1}, "'kk' (did you mean 'k'?)")):
        with pytest.raises(PlanError, match=re.escape(needle)):
            run_spec("--option", "cot", opts)


def test_seakr_uncertainty_says_why_an_estimator_reads_inf():
    from seakr.cli.flags import why_inf as _why_inf
    from seakr.models.base import Generation, Sample

    one = Generation(3, greedy=Sample("", [], [], [], [], "stop"),
                     samples=[Sample("x", [4], [-1.0], [1.0], [1], "stop", state=np.ones(4))])
    assert _why_inf("eigen", one) == "  (compares >= 2 samples with content; 1 here)"
    assert _why_inf("max-entropy", one) == "  (the greedy answer is empty)"
    assert _why_inf("ln-entropy", one) == ""  # one sample with content is enough to read
    blank = Generation(3, greedy=Sample("a", [1], [-1.0], [1.0], [1], "stop"), samples=[Sample("", [], [], [], [], "stop")])
    assert _why_inf("multi-perplexity", blank) == "  (no sample with content)"
