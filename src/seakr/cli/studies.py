"""The study commands: calibrate, detect, rerank-study and ``probe fit|calibrate|gate``, which measure and fit the
signals SeaKR's decisions read."""

from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack

from ..common.console import warn
from ..common.jsontext import strict_json
from ..common.writing import write_atomic
from ..eval.plan import EvalPlan
from ..eval.specs import run_spec
from .args import build_parser
from .flags import CLIError, flag_or_option, model_spec, output_file, parse_options
from ..eval.studies import STUDY_OPTIONS, StudiedSeaKR as SeaKR, read_study_options
from ..eval.datasets import require_golds
from ..eval.rows import STUDY_FILES
from ..eval.resume import data_identity
from ..eval.calibrate import calibrate, calibrate_from_runs, calibration_lines
from ..eval.finished import study_of_rows
from ..progress import progress_bar
from ..search import open_engine
from ..models import DEFAULT_MODEL
from ..common.cache import cache_dir
from ..probes import load_probe
from ..models.figures import model_depth
from ..eval.rowlog import read_run_config, recorded_with
from ..eval.states import tap_name
from ..eval.detect import TAP_KEYWORDS, check_open_book, detect, detect_asking, detect_markdown, parse_taps, study_taps
from ..eval.fitting import calibrate_from_studies, fit_from_studies, gate_from_runs, gate_markdown
from ..probes.probe import calibration_name, packaged_name
from ..probes.bank import SelfKnowledge
from ..eval.rerankstudy import rerank_study
from ..eval.fit import fit, report_markdown
from ..eval.fitplan import FitPlan


def study_setup(args, options: dict | None = None, index: bool = True, check=None, done=None, known=None):
    """A study's plan (one SeaKR run), its questions, the model, the run's effective options and its folder's row
    log, claimed before the model loads (:meth:`~seakr.eval.plan.EvalPlan.claim`). ``check`` (the selection ->
    None, raising on a mistake) runs on the questions before the index is pooled or the model loads. A resumed
    study with nothing left to do is summarised from its rows by ``done(rows, recorded_config, ids)`` (every row it
    holds, the ids of these questions), the model not loaded, and None is returned. ``known`` (the recorded config
    -> the part of the study's own record known now) is held to the recorded one on a resume."""
    study = args.cmd.replace("_", "-")
    options = read_study_options(study, options or {}, getattr(args, "form", None))
    plan = EvalPlan(data=args.data, out=args.out, runs=[run_spec("--option", "seakr", {**STUDY_OPTIONS, **options})],
                    layout=args.layout, index=args.index, filler=list(args.filler), limit=args.limit, every=args.every,
                    seed=args.seed, prompt_set=args.prompt_set, resume=args.resume, model=model_spec(args),
                    rows=STUDY_FILES[study]).check()
    sel = plan.select()
    log, = plan.claim(sel, known=known)
    with ExitStack() as fails:
        fails.callback(log.close)  # let go unless the study takes it
        if study != "rerank-study":  # that one is labelled by the gold passages' titles
            try:
                require_golds(sel.examples, f"`seakr {args.cmd}`")
            except ValueError as e:
                raise CLIError(f"{args.data}: {e}") from None
        if check is not None:
            check(sel)
        cfg = recorded_with(log.recorded, plan.model_name())
        if done is not None and args.resume and cfg and (rows := log.finished(sel.examples)) is not None:
            print(f"nothing left to do: the study holds a row for each of its {len(sel.examples)} question(s); its "
                  "summary from the rows, the model not loaded", file=sys.stderr)
            print("config: " + json.dumps(cfg["method"]), file=sys.stderr)  # as the study recorded it
            done(rows, cfg, {ex.id for ex in sel.examples})
            return None
        if index:
            print(f"index: {plan.ensure_index(sel)}", file=sys.stderr)
        setup = plan, sel, plan.model.load(), plan.options_for(plan.runs[0], sel.family), log
        fails.pop_all()
    return setup


def cmd_calibrate(args) -> int:
    if not args.no_write:  # the threshold is written into the cache after the sweep: know now that it can be
        cache_dir("calibration")
    if args.from_runs:
        plain = vars(build_parser().parse_args(["calibrate", "--from-runs", "N", "A", "--out", "O"]))
        given = [f"--{k.replace('_', '-')}" for k, v in vars(args).items()
                 if k not in ("from_runs", "out", "no_write", "cmd") and v != plain.get(k)]
        if given:  # said, not refused: the runs' own model, data and options are the calibration's
            warn(f"calibrate --from-runs: {', '.join(given)} {'is' if len(given) == 1 else 'are'} not read: the two "
                 "runs fix the model, data and options")
        print(calibration_lines(calibrate_from_runs(*args.from_runs, args.out, write=not args.no_write), args.out))
        return 0
    if not args.data:
        raise CLIError("calibrate: give --data (simple QA), or --from-runs NEVER ALWAYS (multi-hop)")

    def simple_qa(sel) -> None:
        if sel.family != "simpleqa":
            raise CLIError(f"{args.data}: multi-hop questions calibrate from two eval runs: run benchmarks/configs/"
                           "calibrate-multihop.toml with `seakr eval`, then `seakr calibrate --from-runs NEVER ALWAYS`")

    options = parse_options(args.option)
    for key in ("k", "n_candidates"):
        flag_or_option(options, key, f"--{key.replace('_', '-')}", getattr(args, key))
    def done(rows, cfg, ids) -> None:
        print(calibration_lines(study_of_rows("calibrate", args.out, rows, cfg, ids, write=not args.no_write),
                                args.out))

    if (setup := study_setup(args, options, check=simple_qa, done=done)) is None:
        return 0
    plan, sel, lm, opts, log = setup
    with log:
        m = SeaKR(lm, open_engine(plan.index), **opts)
        print("config: " + json.dumps(m.describe()), file=sys.stderr)
        with progress_bar("calibrating", total=len(sel.examples)) as adv:
            r = calibrate(m, sel.examples, args.out, progress=adv, write=not args.no_write, resume=args.resume,
                          data=data_identity(args.data), log=log)
    print(calibration_lines(r, args.out))
    return 0


def _model_depth(args) -> int | None:
    """The decoder layers of the model a command names, where they are known without its weights."""
    return model_depth(args.model or DEFAULT_MODEL)


def detect_known(args, probe):
    """``detect --resume``: what the study's record is known to be before the model loads (the record -> that part
    of it, which the claimed row log holds to the recorded one): its form, setting, wording and probe file, and its
    taps where the model's depth is known without weights. The taps it records begin with the model's own, known
    once loaded: taken as the recorded one, a difference in the rest is one the row log would refuse too."""
    def known(recorded: dict) -> dict:
        out = detect_asking(args.form, args.setting, probe)
        states, depth = recorded.get("states"), _model_depth(args)  # every layer: known for a local or cached model
        if isinstance(states, list) and states and (args.probe not in TAP_KEYWORDS or depth):
            given = [tap_name(t) for t in parse_taps(args.probe, depth)]
            out["states"] = study_taps(states[0], given, tap_name(probe.layer_source) if probe else None)
        return out

    return known


def cmd_detect(args) -> int:
    if args.index or args.filler:  # said and left out: the study searches nothing
        warn(f"detect: {'--index' if args.index else '--filler'} is not read: the study searches nothing (closed-book, "
             "or each question's gold passages with --setting open-book)")
        args.index, args.filler = None, []
    if args.form == "short" and args.prompt_set:
        warn("detect: --prompt-set is not read: the short form asks without demonstrations")
        args.prompt_set = None
    try:  # before the model loads: the spelling, and the layer range where the depth is known without weights
        parse_taps(args.probe, None if args.probe in TAP_KEYWORDS else _model_depth(args))
        probe = None
        if args.probe_file:
            probe = load_probe(args.probe_file)
    except ValueError as e:
        raise CLIError(str(e)) from None
    setup = study_setup(args, parse_options(args.option), index=False, known=detect_known(args, probe),  # no engine
                        check=lambda sel: check_open_book(sel.examples, args.setting),
                        done=lambda rows, cfg, ids: print(detect_markdown(study_of_rows("detect", args.out, rows,
                                                                                         cfg, ids))))
    if setup is None:
        return 0
    plan, sel, lm, opts, log = setup
    with log:
        m = SeaKR(lm, None, **opts)
        try:
            taps = parse_taps(args.probe, lm.info()["layers"])
        except ValueError as e:
            raise CLIError(str(e)) from None
        print("config: " + json.dumps({**m.describe(), "setting": args.setting, "form": args.form,
                                       "probe": args.probe, "probe_file": args.probe_file}), file=sys.stderr)
        with progress_bar("detect", total=len(sel.examples)) as adv:
            r = detect(m, sel.examples, args.out, progress=adv, resume=args.resume, data=data_identity(args.data),
                       setting=args.setting, probe=taps, form=args.form, probe_model=probe, log=log)
    print(detect_markdown(r))
    return 0


def cmd_probe_fit(args) -> int:
    output_file(args.out, "--out")
    def report(tap, p) -> None:
        print(f"{tap}: cross-validated AUROC {p.provenance['cv_auroc']:.3f} (C={p.C:g})", file=sys.stderr)

    probe, table = fit_from_studies(args.runs, args.form, args.tap, args.folds, report=report,
                                    features=args.features)
    probe.save(args.out)
    print(f"probe {probe.form} for {probe.model} at {probe.tap}: cross-validated AUROC "
          f"{probe.provenance['cv_auroc']:.3f} "
          f"on {probe.provenance['n']} answers ({probe.provenance['wrong']} wrong) -> {args.out}")
    _tell_folder_name(args.out, probe.model, lambda m: packaged_name(m, probe.form))
    return 0


def _tell_folder_name(out: str, model: str | None, name_of) -> None:
    """A SeaKR run reads fitted files from its ``probes`` folder by their packaged names only: one written under
    another name is kept as asked, and the user is told the name a run would look for (none where the studies
    recorded no model: ``name_of(model)``, the packaged name, needs one)."""
    name = name_of(model) if model else None
    if name and os.path.basename(out) != name:
        print(f"note: a SeaKR run reads it from its probes folder only under the name {name}", file=sys.stderr)


def cmd_probe_calibrate(args) -> int:
    output_file(args.out, "--out")
    cal = calibrate_from_studies(args.runs, args.estimator, args.form, args.kind)
    cal.save(args.out)
    print(f"calibration {cal.form}/{cal.estimator} ({cal.kind}) on {cal.provenance['n']} answers "
          f"({cal.provenance['correct']} right) -> {args.out}")
    _tell_folder_name(args.out, cal.provenance.get("model"), lambda m: calibration_name(m, cal.form, cal.estimator))
    return 0


def cmd_probe_gate(args) -> int:
    output_file(args.out, "--out")
    if args.save_level and args.probes is None:  # before the runs are read
        raise CLIError("--save-level writes into a probes folder of your own: give it with --probes DIR (the "
                       "package's folder holds the packaged models' levels)")
    method = read_run_config(args.check[0]).get("method") or {}
    model = args.model or (method.get("model") or {}).get("model")
    # the maps read the check runs' scores: they must have been fitted under the sampling those runs drew
    bank = SelfKnowledge(str(model), args.probes, sampling=method.get("config"))
    res = gate_from_runs(args.check, args.chain, args.gate, bank)
    write_atomic(args.out, strict_json(res, indent=2))  # an AUROC of one class only is NaN: null, as in every file
    print(gate_markdown(res) + f" -> {args.out}")
    if args.save_level:
        print(f"gate level {res['gate_p']} for {bank.model} ({args.gate}) -> {bank.save_gate_level(res)}")
    return 0


def cmd_rerank_study(args) -> int:
    def has_gold(sel) -> None:  # without gold titles every recall would read 0, after hours of sampling
        if not any(ex.supporting_titles for ex in sel.examples):
            raise CLIError(f"{args.data}: no question names its supporting passages (gold titles) to score the re-rank "
                           "against; use a layout that carries them (HotpotQA, 2Wiki, MuSiQue, SQuAD, NQ with ctxs)")

    setup = study_setup(args, parse_options(args.option), check=has_gold,
                        done=lambda rows, cfg, ids: print(strict_json(study_of_rows("rerank-study", args.out, rows,
                                                                                    cfg, ids))))
    if setup is None:
        return 0
    plan, sel, lm, opts, log = setup
    with log:
        m = SeaKR(lm, open_engine(plan.index), **opts)
        print("config: " + json.dumps(m.describe()), file=sys.stderr)
        with progress_bar("re-rank study", total=len(sel.examples)) as adv:
            r = rerank_study(m, sel.examples, args.out, progress=adv, resume=args.resume,
                             data=data_identity(args.data), log=log)
    print(strict_json(r))
    return 0


def cmd_fit(args) -> int:
    plan = FitPlan(train=args.train, out=args.out, model=model_spec(args), limit=args.limit, every=args.every,
                   index=args.index, filler=list(args.filler), taps=args.taps, folds=args.folds,
                   options=parse_options(args.option), seed=args.seed, budget_minutes=args.budget,
                   dev_ids=list(args.dev_ids), resume=args.resume)
    print(report_markdown(fit(plan)))
    return 0
