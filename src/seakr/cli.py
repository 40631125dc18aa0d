"""The `seakr` command: each command reads its flags (:mod:`seakr.cliargs`), calls the public API and
prints. No algorithm and no method or dataset default lives here: an evaluation is an
:class:`~seakr.eval.plan.EvalPlan`, whose defaults every door (this command, Ray, Python) shares."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import math
import os
import re
import sys

from .cliargs import build_parser, unescape  # noqa: F401  (unescape: part of the command's surface)
from .search.base import redact
from .textio import (REFUSED_WRITES, KeyTwice, check_escapes, check_output_file, check_question, first_line, loads as textio_loads,
                     message, said, shown, strict_json, too_many_digits, warn, write_atomic)
from .eval.plan import (EvalPlan, ModelSpec, RunSpec, SettingError, check_grid_paths, check_output_dir, check_run,
                        check_settings, read_grid)
from .eval.runner import check_not_a_record, check_rows_home


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3f}"


def _why_inf(name: str, g) -> str:
    """Why an estimator read +inf on a generation ("uncertain": nothing to measure), in a few words."""
    from . import uncertainty as U

    need, rows = U.NEEDS.get(name), int(g.states.shape[0])  # states: the samples with content (never None)
    if need == "samples" and name.startswith("eigen") and rows < 2:
        return f"  (compares >= 2 samples with content; {rows} here)"
    if need == "samples" and not any(s.token_ids for s in g.samples):
        return "  (no sample with content)"
    if need == "greedy" and (g.greedy is None or not g.greedy.token_ids):
        return "  (the greedy answer is empty)"
    return ""


def model_spec(args) -> ModelSpec:
    return ModelSpec(args.model, args.precision, args.device, args.threads, args.layer, args.state_source)


def cmd_uncertainty(args) -> int:
    from . import uncertainty as U
    from .models import GenerationConfig

    prompt = unescape(args.prompt) if args.escapes else args.prompt
    try:  # the rule every question is held to: visible text, valid UTF-8 (invisible characters alone ran)
        check_question(prompt, CLIError)
    except CLIError as e:
        why = "has no visible text" if "non-empty" in str(e) else "is " + str(e).removeprefix("question: ")
        raise CLIError(f"uncertainty: the prompt {why}") from None
    if (ctx := model_spec(args).context()) and args.max_new_tokens >= ctx:  # was refused only after the load
        raise CLIError(f"--max-new-tokens {args.max_new_tokens}: leaves no room for the prompt in the model's "
                       f"{ctx}-token context; lower it")
    if args.temperature == 0:  # as a method refuses it where a decision reads samples
        raise CLIError("--temperature 0: every sample would be the greedy answer, and the sample-based estimators "
                       "would read 'certain' whatever the model knows; give a temperature > 0 (the paper: 1.0)")
    cfg = GenerationConfig(n=args.k, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                           max_new_tokens=args.max_new_tokens, seed=args.seed, greedy_trail=True,
                           stop=tuple(unescape(x) if args.escapes else x for x in args.stop or ["\n"]))
    lm = model_spec(args).load()  # after the config: every knob refused before the seconds of the load
    print("config:", json.dumps({"model": lm.info(), "generation": cfg.to_dict(), "alpha": args.alpha}),
          file=sys.stderr)  # as every command: stdout is the result alone (--json's one document)
    g = lm.generate([prompt], cfg)[0]
    scores = U.all_scores(g, args.alpha)
    if args.prompt_estimator:
        from .methods.base import sufficiency

        scores["prompt"] = sufficiency(lm, prompt, prompt.strip())
    if args.json:  # strict JSON: +inf ("uncertain": nothing to measure) is null, with the reason beside it (it
        # printed the bare token Infinity, which jq and JSON.parse refuse)
        from .methods.records import u_to_json

        print(json.dumps({"greedy": g.greedy.to_dict(), "scores": {k: u_to_json(v) for k, v in scores.items()},
                          "uncertain": {k: _why_inf(k, g).strip(" ()") or "no value" for k, v in scores.items()
                                        if not math.isfinite(v)},
                          "samples": [s.text for s in g.samples], "valid_samples": int(g.states.shape[0]),
                          "seconds": g.seconds}, allow_nan=False))
        return 0
    print(f"greedy: {g.greedy.text!r} ({g.greedy.finish_reason}, {len(g.greedy.token_ids)} tokens)")
    print(f"samples: {len(g.samples)} drawn, {g.states.shape[0]} with content, {g.seconds:.1f} s")
    for name, v in scores.items():
        print(f"  {name:<17}{_fmt(v)}{_why_inf(name, g) if math.isinf(v) else ''}")
    for s in g.samples[: args.show]:
        print(f"  sample: {s.text!r}")
    return 0


def cmd_index_build(args) -> int:
    from .progress import progress_bar
    from .search.build import build_index, check_index_out, pair_sources

    pairs = pair_sources(args.sources, args.format)
    args.engine = check_index_out(args.out, [s for s, _ in pairs], args.engine, args.add)
    with progress_bar(f"indexing into {args.out}") as adv:
        print(build_index(pairs, args.out, engine=args.engine, add=args.add, overwrite=args.overwrite, progress=adv,
                          passage_words=args.passage_words))
    return 0


def cmd_index_info(args) -> int:
    from .search import open_engine

    if args.repair:
        from .search.build import repair_index

        print(json.dumps(repair_index(args.index), indent=2))
        return 0
    if args.verify and os.path.isdir(args.index):  # before opening: a damaged index may not open at all
        from .search.tantivy_engine import TantivyEngine

        TantivyEngine.check_files(args.index)
    eng = open_engine(args.index)
    m = eng.metadata()
    if args.verify and hasattr(eng, "verify"):
        eng.verify()
        m["verified"] = True
    print(json.dumps(m, indent=2))
    return 0


def cmd_search(args) -> int:
    from .search import open_engine

    hits = open_engine(args.index).search(args.query, args.k)
    if args.json:
        print(json.dumps([h.to_dict() for h in hits]))
        return 0
    if not hits:  # not an error: a query of stop words only, or words no passage holds
        print(f"no passage matches {args.query!r}", file=sys.stderr)
    for i, h in enumerate(hits, 1):
        print(f"[{i}] {h.score:8.3f}  {shown(h.title)}  ({shown(h.id)})\n    {shown(h.text[:300])}")
    return 0


def parse_options(pairs: list[str]) -> dict:
    """``--option key=value`` pairs; values parsed as JSON when they look like it (numbers, true, null)."""
    out = {}
    for kv in pairs or []:
        if "=" not in kv:
            raise CLIError(f"--option expects key=value, got {said(kv)}")
        k, v = kv.split("=", 1)
        k = k.strip().replace("-", "_")
        if not k:
            raise CLIError(f"--option expects key=value, got {said(kv)}")
        try:
            value = textio_loads(v)
            check_escapes(v, f"--option {k}", CLIError, numbered=False)
        except KeyTwice as e:  # JSON still, not text
            raise CLIError(f"--option {k}: {e.msg}") from None
        except json.JSONDecodeError:  # text, or a whole number JSON refuses ("020")
            try:
                value = int(v) if re.fullmatch(r"\s*[+-]?\d+\s*", v) else v
            except ValueError as e:  # only Python's bound on digits refuses a string of digits
                raise CLIError(f"--option {k}: {too_many_digits(e)}") from None
        if k in out and out[k] != value:  # the last one won without a word
            raise CLIError(f"--option {k}: given twice ({json.dumps(out[k])}, then {json.dumps(value)}); give it once")
        out[k] = value
    return out


def one_value(options: dict, key: str, flag: str, value) -> None:
    """A flag that is also an option (``--delta`` and ``--option delta=``) holds one value, or one line says
    both were given (``ask`` took the flag's, ``eval`` the option's)."""
    if value is not None and key in options and options[key] != value:
        raise CLIError(f"{flag} {value} and --option {key}={json.dumps(options[key])}: give one")


def flag_or_option(options: dict, key: str, flag: str, value) -> None:
    """:func:`one_value`, then the flag's value into the options."""
    one_value(options, key, flag, value)
    if value is not None:
        options[key] = value


def _method_from_args(args):
    """The method of ``ask``/``demo``: options and index are checked before the model loads (seconds)."""
    from .methods import METHODS, build_method
    from .methods.base import warn_unread_tap
    from .search import open_engine

    opts = parse_options(args.option)
    if args.delta is not None:
        if "delta" not in {f.name for f in dataclasses.fields(METHODS[args.method].Config)}:
            raise CLIError(f"--delta: method {args.method!r} has no retrieval threshold (SeaKR's delta)")
        flag_or_option(opts, "delta", "--delta", args.delta)
    flag_or_option(opts, "prompt_set", "--prompt-set", getattr(args, "prompt_set", None) or None)
    check_run("--option", args.method, opts, model_spec(args).context())  # bad options fail here, not after the load
    if not args.index and METHODS[args.method].retrieves:  # else it fails at its first search, after the load
        raise CLIError(f"--index: method {args.method!r} searches; pass --index (an index folder, an "
                       "http(s)://host:9200/INDEX URL or a corpus file; `seakr index build` makes a folder)")
    engine = open_engine(args.index) if args.index else None
    m = build_method(args.method, model_spec(args).load(), engine, **opts)
    warn_unread_tap(m, model_spec(args).tap_given())
    return m


def cmd_ask(args) -> int:
    check_question(args.question)
    from .methods import METHODS

    if args.index and not METHODS[args.method].retrieves:  # opened, and never searched
        raise CLIError(f"--index: method {args.method!r} never searches; leave it out (or choose a method that "
                       "retrieves)")
    if args.html is not None:
        output_file(args.html, "--html", args.overwrite)
    m = _method_from_args(args)
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    _answer_and_show(m, args.question, args)
    return 0


def _answer_and_show(m, question: str, args):
    """Answer with the live line, then print the answer (``--json``: with its trace) and write ``--html``."""
    from .progress import LiveLine

    live = LiveLine()
    try:
        ans = m.answer(question, listener=live)
    finally:
        live.close()
    print(json.dumps(ans.to_dict()) if args.json else ans.summary(), flush=True)  # the answer first, whatever follows
    if args.html:
        from .serve.render import write_answer_html

        try:
            write_answer_html(ans, args.html)
        except OSError as e:
            raise CLIError(f"--html {args.html}: {e.strerror or e}") from None
        print(f"wrote {args.html}", file=sys.stderr)


def plan_from_args(args) -> EvalPlan:
    """``seakr eval``'s flags as a plan; with ``--config``, the grid's runs, and its top-level keys fill
    the flags left at their defaults. (The flags are read first, then the plan's layer takes over.)"""
    options = parse_options(args.option)
    top, runs = read_grid(args.config) if args.config else ({}, [])

    def flag(key, default=None):
        v = getattr(args, key)
        return top[key] if key in top and v in (None, default) else v

    if runs and (args.method is not None or options):  # they were dropped without a word: the table was another method's
        given = " and ".join(f for f, v in (("--method", args.method), ("--option", options)) if v)
        raise CLIError(f"{given}: {args.config} names its runs in [[run]] tables; put the method and its options "
                       "there (or leave [[run]] out to run the flags' method)")
    if not runs:  # the flags' run: a value both as a flag and as an option is one value
        one_value(options, "delta", "--delta", args.delta)  # the plan takes the flags; the run the options
        one_value(options, "prompt_set", "--prompt-set", args.prompt_set)
        args.method = args.method or "seakr"
        check_run("--option", args.method, options)
        runs = [RunSpec(args.method, options)]
    if args.config:  # the paths the run takes from the grid, not from a flag
        taken = {k: top[k] for k in ("data", "index", "prompt_set", "model") if k in top and flag(k) is top[k]}
        check_grid_paths(args.config, taken | ({"filler": top["filler"]} if "filler" in top and not args.filler else {}))
    if args.config and "threads" in top and flag("threads") is top["threads"] and getattr(args, "ray", None) is None:
        from .models.machine import check_threads  # here, where the run's machine is known, naming the file's key

        try:
            check_threads(top["threads"], f"{args.config}: key 'threads':")
        except ValueError as e:
            raise CLIError(str(e)) from None
    spec = ModelSpec(flag("model"), flag("precision", "auto"), flag("device", "cpu"), flag("threads"), flag("layer"),
                     flag("state_source", "mlp"))  # made again, not set field by field: the grid's values read as the flags'
    return EvalPlan(data=flag("data"), out=flag("out"), runs=runs, layout=flag("layout", "auto"), index=flag("index"),
                    filler=list(args.filler) or list(top.get("filler", [])), limit=flag("limit"), every=flag("every"),
                    shard=args.shard, seed=flag("seed", 42), prompt_set=flag("prompt_set"), delta=flag("delta"),
                    resume=args.resume, concurrency=flag("concurrency", 1), grid=bool(args.config), model=spec)


#: The Ray launch's flags and their values when --ray is given without them.
RAY_DEFAULTS = {"shards": 2, "cpus_per_shard": 1.0, "gpus_per_shard": 0.0}


def cmd_eval(args) -> int:
    from .eval.plan import run_plan
    from .eval.runner import summary_markdown

    given = [f"--{k.replace('_', '-')}" for k in RAY_DEFAULTS if getattr(args, k) is not None]
    if args.ray is None and given:  # they were dropped: the whole file ran unsharded in this one process
        raise CLIError(f"{', '.join(given)}: with --ray only (a Ray launch of N shards); one shard by hand is --shard I/N")
    for k, v in RAY_DEFAULTS.items():
        setattr(args, k, v if getattr(args, k) is None else getattr(args, k))
    plan = plan_from_args(args)  # run_plan / run_shards check it before anything slow
    if not plan.data or not plan.out:  # said here in flags; the plan's check names its fields
        raise CLIError("eval: --data and --out are required (or set them in --config)")
    for r in plan.runs if isinstance(plan.out, str) and plan.out else ():  # a grid's runs: a folder each under --out
        check_rows_home(plan.out_for(r), "results.jsonl")  # a ValueError: main's one line, as a CLIError
    if args.ray is not None:
        from .eval.cluster import run_shards

        sums = [run_shards(plan, args.shards, address=None if args.ray == "local" else args.ray,
                           num_cpus=args.cpus_per_shard, num_gpus=args.gpus_per_shard)]
    else:
        sums = run_plan(plan)
    print(summary_markdown(sums))
    return 0


def cmd_merge(args) -> int:
    from .eval.runner import merge_runs, summary_markdown

    check_output_dir(args.out)
    print(summary_markdown([merge_runs(args.out, args.dirs)]))
    return 0


def output_file(path: str, flag: str, overwrite: bool | None = None) -> None:
    """An output flag's file, checked before any slow work: writable, not a run's, study's or index's own, and (where
    the command has ``--overwrite``: ``overwrite`` not None) not a file of someone else's that exists: a page seakr
    wrote is replaced, any other file only with ``--overwrite``."""
    if path == "-":  # was a file named "-"; where "-" means standard output the command says so before this
        raise CLIError(f"{flag} -: this command writes a file here (its own report goes to standard output); name it")
    check_output_file(path, flag)
    check_not_a_record(path, flag)
    if overwrite is False and os.path.isfile(path) and not _seakr_page(path):
        raise CLIError(f"{flag} {path}: exists and seakr did not write it; pass --overwrite to replace it")


def _seakr_page(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"<meta name='generator' content='seakr'>" in f.read(4096)
    except OSError:
        return False


def cmd_compare(args) -> int:
    from .eval.runner import compare

    print(compare(args.dirs))
    return 0


def cmd_export(args) -> int:
    from .eval.runner import export_predictions
    from .textio import write_atomic

    to_file = args.out not in (None, "-")
    if to_file:
        output_file(args.out, "--out")
    text = export_predictions(args.dir, args.format)
    if not to_file:
        sys.stdout.write(text)
    else:
        write_atomic(args.out, text)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def study_setup(args, options: dict | None = None, index: bool = True, check=None, done=None):
    """A study's plan (one SeaKR run), its questions, the model and the run's effective options. ``check``
    (the selection -> None, raising on a mistake) runs on the questions before the index is pooled or the model loads.
    A resumed study with nothing left to do is summarised from its rows by ``done(rows, recorded_config, ids)``
    (every row it holds, the ids of these questions), the model not loaded, and None is returned."""
    from .eval.studies import STUDY_OPTIONS, check_study_options, finished_study

    try:
        check_study_options(args.cmd.replace("_", "-"), options or {}, getattr(args, "form", None))
    except ValueError as e:
        raise CLIError(str(e)) from None
    plan = EvalPlan(data=args.data, out=args.out, runs=[RunSpec("seakr", {**STUDY_OPTIONS, **(options or {})})],
                    layout=args.layout, index=args.index, filler=list(args.filler), limit=args.limit, every=args.every,
                    seed=args.seed, prompt_set=args.prompt_set, resume=args.resume, model=model_spec(args)).check()
    from .eval.datasets import require_golds
    from .eval.studies import STUDY_FILES

    check_rows_home(plan.out, STUDY_FILES[args.cmd.replace("_", "-")])  # now, not once the model has loaded
    sel = plan.select()
    plan.check_resumed_configs(sel)
    if args.cmd.replace("_", "-") != "rerank-study":  # that one is labelled by the gold passages' titles
        try:
            require_golds(sel.examples, f"`seakr {args.cmd}`")
        except ValueError as e:
            raise CLIError(f"{args.data}: {e}") from None
    if check is not None:
        check(sel)
    study = args.cmd.replace("_", "-")
    if done is not None and args.resume and (found := finished_study(study, plan.out, sel.examples,
                                                                     plan.model_name())) is not None:
        print(f"nothing left to do: the study holds a row for each of its {len(sel.examples)} question(s); its "
              "summary from the rows, the model not loaded", file=sys.stderr)
        print("config: " + json.dumps(found[1]["method"]), file=sys.stderr)  # as the study recorded it
        done(*found)
        return None
    if index:
        print(f"index: {plan.ensure_index(sel)}", file=sys.stderr)
    return plan, sel, plan.model.load(), plan.options_for(plan.runs[0], sel.family)


def cmd_calibrate(args) -> int:
    if not args.no_write:  # the threshold is written into the cache after the sweep: know now that it can be
        from .models.registry import cache_dir

        cache_dir("calibration")
    if args.from_runs:
        from .eval.studies import calibrate_from_runs, calibration_lines

        if args.data:
            raise CLIError("calibrate: --from-runs reads two eval runs; it takes no --data")
        plain = vars(build_parser().parse_args(["calibrate", "--from-runs", "N", "A", "--out", "O"]))
        given = [f"--{k.replace('_', '-')}" for k, v in vars(args).items()
                 if k not in ("from_runs", "out", "no_write", "cmd") and v != plain.get(k)]
        if given:  # taken and never read: the runs' own model, data and options are the calibration's
            raise CLIError(f"calibrate --from-runs: {', '.join(given)}: the two runs fix the model, data and options; "
                           "leave it out")
        print(calibration_lines(calibrate_from_runs(*args.from_runs, args.out, write=not args.no_write), args.out))
        return 0
    if not args.data:
        raise CLIError("calibrate: give --data (simple QA), or --from-runs NEVER ALWAYS (multi-hop)")
    from .eval.runner import data_identity
    from .eval.studies import calibrate, calibration_lines, study_of_rows
    from .eval.studies import StudiedSeaKR as SeaKR  # the study reads its own options
    from .progress import progress_bar
    from .search import open_engine

    def simple_qa(sel) -> None:
        if sel.family != "simpleqa":
            raise CLIError(f"{args.data}: multi-hop questions calibrate from two eval runs: run benchmarks/configs/"
                           "calibrate-multihop.toml with `seakr eval`, then `seakr calibrate --from-runs NEVER ALWAYS`")

    options = parse_options(args.option)
    for key in ("k", "n_candidates"):
        flag_or_option(options, key, f"--{key.replace('_', '-')}", getattr(args, key))
    def done(rows, cfg, ids) -> None:
        print(calibration_lines(study_of_rows("calibrate", args.out, rows, cfg, ids, write=not args.no_write), args.out))

    if (setup := study_setup(args, options, check=simple_qa, done=done)) is None:
        return 0
    plan, sel, lm, opts = setup
    m = SeaKR(lm, open_engine(plan.index), **opts)
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    with progress_bar("calibrating", total=len(sel.examples)) as adv:
        r = calibrate(m, sel.examples, args.out, progress=adv, write=not args.no_write, resume=args.resume,
                      data=data_identity(args.data))
    print(calibration_lines(r, args.out))
    return 0


def _model_depth(args) -> int | None:
    """The decoder layers of the model a command names, where they are known without its weights."""
    from .models import DEFAULT_MODEL
    from .models.registry import model_depth

    return model_depth(args.model or DEFAULT_MODEL)


def _detect_asks_as_before(args, probe) -> None:
    """``detect --resume``: what the study recorded of how it asks, compared where it is known before the model
    loads (as RowLog compares it after): the form, setting, wording, probe file and taps (another probe file
    or --probe was refused once the model had loaded). The taps it records begin with the model's own, known
    once loaded: taken as the recorded one, a difference in the rest is one the row log would refuse too."""
    if not (args.resume and os.path.isfile(os.path.join(args.out, "config.json"))):
        return
    from .eval.runner import check_same_asking, read_run_config
    from .eval.states import tap_name
    from .eval.studies import TAP_KEYWORDS, detect_asking, parse_taps, study_taps

    old = read_run_config(args.out)
    check_same_asking(old, json.loads(json.dumps(detect_asking(args.form, args.setting, probe))), args.out)
    recorded = old.get("states")
    depth = _model_depth(args)  # every layer: known here for a local model (or a cached hub one)
    if not (isinstance(recorded, list) and recorded) or (args.probe in TAP_KEYWORDS and not depth):
        return  # the taps settle with the model's depth
    given = [tap_name(t) for t in parse_taps(args.probe, depth)]
    now = study_taps(recorded[0], given, tap_name(probe.layer_source) if probe else None)
    check_same_asking({"states": recorded}, {"states": now}, args.out)


def cmd_detect(args) -> int:
    from .eval.runner import data_identity
    from .eval.studies import TAP_KEYWORDS, check_open_book, detect, detect_markdown, parse_taps, study_of_rows
    from .eval.studies import StudiedSeaKR as SeaKR  # the study reads its own options
    from .progress import progress_bar

    if args.index or args.filler:  # taken and never read: the study searches nothing
        raise CLIError(f"detect: {'--index' if args.index else '--filler'}: the study searches nothing (closed-book, "
                       "or each question's gold passages with --setting open-book); leave it out")
    if args.form == "short" and args.prompt_set:  # taken, recorded and never read
        raise CLIError("detect: --prompt-set: the short form asks without demonstrations; leave it out")
    try:  # before the model loads: the spelling, and the layer range where the depth is known without weights
        parse_taps(args.probe, None if args.probe in TAP_KEYWORDS else _model_depth(args))
        probe = None
        if args.probe_file:
            from .probes import load_probe

            probe = load_probe(args.probe_file)
    except ValueError as e:
        raise CLIError(str(e)) from None
    _detect_asks_as_before(args, probe)
    setup = study_setup(args, parse_options(args.option), index=False,  # no engine: see above
                        check=lambda sel: check_open_book(sel.examples, args.setting),
                        done=lambda rows, cfg, ids: print(detect_markdown(study_of_rows("detect", args.out, rows, cfg, ids))))
    if setup is None:
        return 0
    plan, sel, lm, opts = setup
    m = SeaKR(lm, None, **opts)
    try:
        taps = parse_taps(args.probe, lm.info()["layers"])
    except ValueError as e:
        raise CLIError(str(e)) from None
    print("config: " + json.dumps({**m.describe(), "setting": args.setting, "form": args.form, "probe": args.probe,
                                   "probe_file": args.probe_file}), file=sys.stderr)
    with progress_bar("detect", total=len(sel.examples)) as adv:
        r = detect(m, sel.examples, args.out, progress=adv, resume=args.resume, data=data_identity(args.data),
                   setting=args.setting, probe=taps, form=args.form, probe_model=probe)
    print(detect_markdown(r))
    return 0


def cmd_probe_fit(args) -> int:
    from .probes.fitting import fit_from_studies
    from .probes.probe import packaged_name

    output_file(args.out, "--out")
    probe, table = fit_from_studies(args.runs, args.form, args.tap, args.folds,
                                    report=lambda t, p: print(f"{t}: cross-validated AUROC {p.provenance['cv_auroc']:.3f} "
                                                              f"(C={p.C:g})", file=sys.stderr), features=args.features)
    probe.save(args.out)
    print(f"probe {probe.form} for {probe.model} at {probe.tap}: cross-validated AUROC {probe.provenance['cv_auroc']:.3f} "
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
    from .probes.fitting import calibrate_from_studies
    from .probes.probe import calibration_name

    output_file(args.out, "--out")
    cal = calibrate_from_studies(args.runs, args.estimator, args.form, args.kind)
    cal.save(args.out)
    print(f"calibration {cal.form}/{cal.estimator} ({cal.kind}) on {cal.provenance['n']} answers "
          f"({cal.provenance['correct']} right) -> {args.out}")
    _tell_folder_name(args.out, cal.provenance.get("model"), lambda m: calibration_name(m, cal.form, cal.estimator))
    return 0


def cmd_probe_gate(args) -> int:
    from .eval.runner import read_run_config
    from .probes.bank import SelfKnowledge
    from .probes.fitting import gate_from_runs, gate_markdown

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
    from .eval.runner import data_identity
    from .eval.studies import rerank_study, study_of_rows
    from .eval.studies import StudiedSeaKR as SeaKR  # the study reads its own options
    from .progress import progress_bar
    from .search import open_engine

    def has_gold(sel) -> None:  # without gold titles every recall would read 0, after hours of sampling
        if not any(ex.supporting_titles for ex in sel.examples):
            raise CLIError(f"{args.data}: no question names its supporting passages (gold titles) to score the re-rank "
                           "against; use a layout that carries them (HotpotQA, 2Wiki, MuSiQue, SQuAD, NQ with ctxs)")

    setup = study_setup(args, parse_options(args.option), check=has_gold,
                        done=lambda rows, cfg, ids: print(strict_json(study_of_rows("rerank-study", args.out, rows, cfg, ids))))
    if setup is None:
        return 0
    plan, sel, lm, opts = setup
    m = SeaKR(lm, open_engine(plan.index), **opts)
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    with progress_bar("re-rank study", total=len(sel.examples)) as adv:
        r = rerank_study(m, sel.examples, args.out, progress=adv, resume=args.resume, data=data_identity(args.data))
    print(strict_json(r))
    return 0


def cmd_demo(args) -> int:
    import time

    from .eval.corpus import DEMO_QUESTION, demo_index

    # a question given is checked now: "" ran the demo's own question without a word (after the model loaded)
    question = DEMO_QUESTION if args.question is None else check_question(args.question)
    if args.html is not None:
        output_file(args.html, "--html", args.overwrite)
    args.index = args.index or demo_index()
    print(f"index: {redact(args.index)}", file=sys.stderr)
    t = time.perf_counter()
    m = _method_from_args(args)
    load = time.perf_counter() - t
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    t = time.perf_counter()
    _answer_and_show(m, question, args)
    timing = f"(model load {load:.1f} s, answer {time.perf_counter() - t:.1f} s)"
    print(timing, file=sys.stderr if args.json else sys.stdout)  # --json: stdout is one JSON document
    return 0


def cmd_serve(args) -> int:
    import uvicorn

    from .search import open_engine
    from .serve.app import AnswerService, ServiceLimits, create_app

    token = args.token if args.token is not None else os.environ.get("SEAKR_TOKEN")
    if token is not None and not token.strip():
        raise CLIError("--token (or SEAKR_TOKEN) is empty: give a non-empty token, or leave it out to serve without one")
    from .serve.app import check_memory, check_port, is_loopback

    check_memory(args.workers, args.max_kv_mb, args.device or "cpu")  # before the load; the service checks again
    check_port(args.host, args.port)
    opts = parse_options(args.option)
    check_run("--option", args.method, opts, model_spec(args).context())
    local = is_loopback(args.host)
    if not local and not token:
        warn(f"serving on {args.host} without a token: anyone who can reach this address can use the model; pass "
             "--token (or SEAKR_TOKEN) and see README 'Serving'")
    limits = ServiceLimits(max_rows=args.max_rows, max_work=args.max_work, max_kv_mb=args.max_kv_mb, max_body=args.max_body,
                           max_prompt_tokens=args.max_prompt_tokens, body_seconds=args.body_timeout, token=token,
                           docs=local if args.docs is None else args.docs, cors_origins=tuple(args.cors_origin))
    from .eval.corpus import demo_index

    index = args.index or demo_index()
    engine = open_engine(index)
    svc = AnswerService(model_spec(args).load(), engine, args.method, opts, workers=args.workers, queue=args.queue,
                        timeout=args.timeout, limits=limits)
    from fastapi import HTTPException

    try:
        default = svc.build_default()
        svc.check_budget(default)
    except HTTPException as e:
        raise CLIError(f"the server's own defaults exceed its limits: {e.detail}") from None
    from .methods.base import warn_unread_tap

    warn_unread_tap(default, model_spec(args).tap_given())  # the server's own method; a request may choose another
    print(f"seakr serving {svc.lm.info()['model']} over {redact(index)} on http://{args.host}:{args.port}"
          f"{' (token required)' if token else ''}", file=sys.stderr)
    uvicorn.run(create_app(svc), host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_report(args) -> int:
    from .search.base import MANIFEST
    from .serve.render import report_html, write_report

    if not os.path.isdir(args.dir):  # else the default --out inside it is what the error would name
        raise CLIError(f"{args.dir}: " + ("not a directory (a run or study folder)" if os.path.exists(args.dir)
                                          else "no such directory"))
    if os.path.isfile(os.path.join(args.dir, MANIFEST)):  # not "--out DIR/report.html: inside the index"
        raise CLIError(f"{args.dir}: a seakr index, not a run or study folder (`seakr index info` describes it)")
    if args.out == "-":
        sys.stdout.write(report_html(args.dir))
        return 0
    out = args.out or os.path.join(args.dir, "report.html")
    output_file(out, "--out", args.overwrite)  # before the run folder is read
    write_report(args.dir, out)
    print(f"wrote {out}")
    return 0


class Stopped(KeyboardInterrupt):
    """SIGTERM (a scheduler preempting a job, ``kill``, ``timeout``) taken as Ctrl-C is: the row files close and
    the run's lock is released on the way out, and one line says what was kept (it ended the process at once,
    silently, its lock left for the next run to find stale)."""


@contextlib.contextmanager
def _stop_on_sigterm(wanted: bool):
    """SIGTERM raises :class:`Stopped` while a command runs; the handler before it is put back after (main()
    is called in-process by tests and by users' scripts)."""
    import signal

    def stop(signum, frame):
        raise Stopped()

    try:
        before = signal.signal(signal.SIGTERM, stop) if wanted else None
    except ValueError:  # main() called from another thread: the caller's signals are its own
        before = None
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)


def interrupted(args, e: KeyboardInterrupt) -> str:
    """The line a stopped command ends with: where a run's finished questions are, and how to go on."""
    how = "stopped (SIGTERM)" if isinstance(e, Stopped) else "interrupted"
    out = getattr(args, "out", None)
    if hasattr(args, "resume") and isinstance(out, str) and os.path.isdir(out):
        return f"{how}; the questions finished are kept in {out}: the same command with --resume goes on from them"
    return how


def _printable_output() -> None:
    """Answers, titles and passages printed to a console whose encoding cannot spell them (a Windows code page,
    ``PYTHONIOENCODING=ascii``) failed the command after its work ("'ascii' codec can't encode character");
    they print with backslash escapes instead, as Python's own stderr does. A stream closed when the command
    started (``2>&-``, a supervisor that closes them) is Python's None: every command with a progress bar
    ended in an AttributeError before its work, its errors went to stdout, and the next file opened would have
    taken the free descriptor, where a library's own messages to fd 2 would have been written into it. It is
    given /dev/null: the work runs, the exit status tells how it went."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:  # fd 0 was closed too, and took it
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, "w", encoding="utf-8", closefd=False))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a text file (a test's capture, a StringIO)
            pass


def _stdout_to_null() -> None:
    """After stdout has failed: let the interpreter's last flush find somewhere to write (else a second error)."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class OutputRefused(OSError):
    """A write to stdout the system refused (a full disk under ``> file``, a descriptor opened for reading)."""


class _NamedOutput:
    """stdout, whose refused writes say they were stdout's: a print to ``> /dev/full`` was "no space left on the
    device ... a run goes on with --resume", as if a run's rows had failed, and ``1<file`` a traceback.
    A reader gone away stays a BrokenPipeError (exit 141, quietly)."""

    def __init__(self, stream):
        self._stream = stream

    def _call(self, name: str, *args):
        try:
            return getattr(self._stream, name)(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputRefused(e.errno, e.strerror) from None

    def write(self, text: str) -> int:
        return self._call("write", text)

    def flush(self) -> None:
        self._call("flush")

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _our_warnings_as_notes() -> None:
    """seakr's own warnings (an emulated precision) printed as the command's other notes are: one
    ``seakr: warning:`` line, not Python's file:line form with a source line under it. Others keep theirs."""
    import warnings

    python_show = warnings.showwarning
    if getattr(python_show, "seakr_notes", False):  # main() called again in one process (tests, a notebook)
        return

    def show(msg, category, filename, lineno, file=None, line=None):
        if category.__module__.startswith("seakr."):
            warn(str(msg), once=True)
        else:
            python_show(msg, category, filename, lineno, file, line)
    show.seakr_notes = True
    warnings.showwarning = show


def main(argv: list[str] | None = None) -> int:
    _printable_output()
    _our_warnings_as_notes()
    stdout, sys.stdout = sys.stdout, _NamedOutput(sys.stdout)
    try:
        return _main(argv)
    finally:
        sys.stdout = stdout


def _main(argv: list[str] | None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    if getattr(args, "format", 0) is None:
        args.format = ["auto"]
    try:
        with _stop_on_sigterm(args.cmd != "serve"):  # the server shuts down gracefully on SIGTERM by itself
            precheck(args)
            rc = int(COMMANDS[args.cmd](args) or 0)
            sys.stdout.flush()  # here, where a reader gone away is caught, not at the interpreter's exit
            return rc
    except user_errors() as e:
        # Bad input, a missing model or package, a bad index: one line naming the problem, exit 2.
        # Anything else (a bug, torch running out of memory) keeps its traceback.
        said = e.as_flag() if isinstance(e, SettingError) else os_said(e) if isinstance(e, OSError) else e
        print(f"seakr: error: {message(said)}", file=sys.stderr)  # it may quote a question or a passage
        return 2
    except KeyboardInterrupt as e:
        print(f"seakr: {interrupted(args, e)}", file=sys.stderr)
        return 143 if isinstance(e, Stopped) else 130
    except BrokenPipeError:  # the reader went away (`seakr search ... | head -1`): stop quietly, as Unix tools do
        _stdout_to_null()
        return 141  # 128 + SIGPIPE, what a shell reports for a tool the pipe stopped
    except OutputRefused as e:  # the command's files are written as they go; what it printed is what was lost
        _stdout_to_null()
        print(f"seakr: error: cannot write to stdout ({REFUSED_WRITES.get(e.errno) or e.strerror}); the output "
              "printed there is incomplete", file=sys.stderr)
        return 3
    except (MemoryError, RuntimeError, OSError) as e:
        if isinstance(e, OSError) and (said := path_refused(e)):
            print(f"seakr: error: {message(said)}", file=sys.stderr)
            return 2
        said = out_of_memory(e, args.command) if not isinstance(e, OSError) else disk_refused(e)
        if said is None:
            raise
        print(f"seakr: error: {message(said)}", file=sys.stderr)
        return 3


#: paths the system cannot follow, wherever a command first touches them (a traceback from the first stat)
_BAD_PATHS = {errno.ENAMETOOLONG: "a name longer than this file system takes (255 bytes a name, 4096 a path on "
                                  "Linux); choose a shorter one",
              errno.ELOOP: "a symbolic link that points back at itself; remove it or choose another path",
              # a run's own file made a folder (results.jsonl, config.json): "[Errno 21] Is a directory: '...'"
              errno.EISDIR: "is a directory, expected a file; move it away or choose another path",
              errno.ENOTDIR: "a path through a file as if it were a folder; choose another path"}


def os_said(e: OSError) -> str | OSError:
    """A refused path as our lines name one, ``PATH: why`` ("[Errno 21] Is a directory: 'run/results.jsonl'" where
    a run's own file had been made a folder); the error as it is where it names no path."""
    if (said := path_refused(e)) is not None:
        return said
    return f"{e.filename}: {e.strerror[:1].lower()}{e.strerror[1:]}" if e.filename and e.strerror else e


def path_refused(e: OSError) -> str | None:
    """One line for a path the system refuses (a file name of 300 characters as --out, a link loop), naming
    it; None for any other OSError."""
    why = _BAD_PATHS.get(e.errno)
    return f"{e.filename}: {why}" if why and e.filename else None


def disk_refused(e: OSError) -> str | None:
    """One line for a write the file system refused (a full disk wrote a traceback from inside the row
    log's close); rows already written are on disk, so ``--resume`` goes on from them. None for any
    other OSError (it keeps its traceback)."""
    why = REFUSED_WRITES.get(e.errno)
    if why is None:
        return None
    return (f"{why}{f' (writing {e.filename})' if e.filename else ''}; what was written before it is kept "
            "(a run goes on with --resume once there is room)")


#: commands that run no model: their memory is the data they read, not k or a batch
_NO_MODEL = ("index", "search", "merge", "compare", "export", "report", "probe")


def out_of_memory(e: BaseException, command: str | None = None) -> str | None:
    """One line for an allocation the machine cannot give (k = 10**11 samples asked 40 TB of CPU memory
    and printed torch's traceback), naming the knobs that size it; None for any other error (a fault in
    seakr keeps its traceback). An index build out of memory was told to lower k and load the model in a
    smaller precision: a command that runs no model is told what it read instead."""
    text = first_line(e, limit=1000)
    if not (isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in text or "out of memory" in text.lower()):
        return None
    m = re.search(r"allocate (\d+) bytes", text) or re.search(r"allocate ([0-9.]+ ?[KMGT]i?B)", text)
    wanted = m and (f"{int(m.group(1)) / 1e9:,.1f} GB" if m.group(1).isdigit() else m.group(1))
    said = f"asked for {wanted}" if wanted else ""
    if said and (free := re.search(r"[0-9.]+ GB are free", text)):  # the model's own refusal says what it had
        said += f"; {free.group(0)}"
    if command in _NO_MODEL:
        return (f"out of memory{f' ({said})' if said else ''}: the files `seakr {command}` read did not fit; "
                "split them, or run it where there is more memory")
    return (f"out of memory{f' ({said})' if said else ''}: lower k, max_new_tokens, n_candidates or --concurrency, "
            "or load the model in a smaller precision")


def precheck(args) -> None:
    """Flags whose mistakes would otherwise surface only after the model has loaded (a minute on a CPU):
    the device's spelling, the state layer against a packaged model's depth, the seed's range, a
    prompt-set file. Each gets one line naming the flag."""
    if getattr(args, "device", None) is not None:
        model_spec(args).check()
    check_settings(getattr(args, "seed", None), getattr(args, "prompt_set", None))


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean "the input is wrong", as opposed to a fault in seakr or the machine.
    ``ValueError`` covers our validation (options, datasets, corpora, missing model capabilities)."""
    from .models.registry import ModelError
    from .search.base import SearchError

    return (CLIError, ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
            ModelError, SearchError)


COMMANDS = {name[4:]: f for name, f in dict(globals()).items() if name.startswith("cmd_")}


if __name__ == "__main__":
    sys.exit(main())
