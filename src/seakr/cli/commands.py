"""The commands that answer, evaluate, search, index, serve and show: each reads its flags into the schema its
library call takes, then calls it."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys

from ..search.base import redact
from ..common.checks import check_question, question_text
from ..common.console import shown, warn
from ..common.writing import write_atomic
from ..eval.grid import check_grid_paths, read_grid
from ..eval.plan import EvalPlan, run_plan
from ..eval.specs import ModelSpec, PlanError, SettingError, run_spec
from ..common.runs import MANIFEST
from .args import unescape
from .flags import CLIError, fmt, why_inf, flag_or_option, model_spec, one_value, output_file, parse_options
import time
from .. import uncertainty as U
from ..models import GenerationConfig
from ..progress import LiveLine
from ..search.build import build_index, pair_sources, repair_index
from ..search import open_engine
from ..methods import METHODS, build_method
from ..methods.base import sufficiency, warn_unread_tap
from ..methods.records import u_to_json
from ..search.tantivy_engine import TantivyEngine
from ..serve.render import write_answer_html
from ..serve.schema import Door, OptionRefused
from ..eval.cluster import run_shards
from ..eval.summary import summary_markdown
from ..eval.merge import export_predictions, merge_runs
from ..eval.compare import compare
from ..eval.corpus import DEMO_QUESTIONS, demo_index
from ..serve.render import report_html, write_report


def cmd_uncertainty(args) -> int:
    prompt = unescape(args.prompt) if args.escapes else args.prompt
    try:  # the rule every question is held to: visible text, valid UTF-8 (invisible characters alone ran)
        question_text(prompt)
    except ValueError as e:
        raise CLIError(f"uncertainty: the prompt: {e}") from None
    if (ctx := model_spec(args).context()) and args.max_new_tokens >= ctx:  # before the load
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
        scores["prompt"] = sufficiency(lm, prompt, prompt.strip())
    if args.json:  # strict JSON: +inf ("uncertain": nothing to measure) is null, with the reason beside it (the
        # bare token Infinity is refused by jq and JSON.parse)
        print(json.dumps({"greedy": g.greedy.to_dict(), "scores": {k: u_to_json(v) for k, v in scores.items()},
                          "uncertain": {k: why_inf(k, g).strip(" ()") or "no value" for k, v in scores.items()
                                        if not math.isfinite(v)},
                          "samples": [s.text for s in g.samples], "valid_samples": int(g.states.shape[0]),
                          "seconds": g.seconds}, allow_nan=False))
        return 0
    print(f"greedy: {g.greedy.text!r} ({g.greedy.finish_reason}, {len(g.greedy.token_ids)} tokens)")
    print(f"samples: {len(g.samples)} drawn, {g.states.shape[0]} with content, {g.seconds:.1f} s")
    for name, v in scores.items():
        print(f"  {name:<17}{fmt(v)}{why_inf(name, g) if math.isinf(v) else ''}")
    for s in g.samples[: args.show]:
        print(f"  sample: {s.text!r}")
    return 0


def cmd_index_build(args) -> int:
    print(build_index(pair_sources(args.sources, args.format), args.out, engine=args.engine, add=args.add,
                      overwrite=args.overwrite, progress=True, passage_words=args.passage_words))
    return 0


def cmd_index_info(args) -> int:
    if args.repair:
        print(json.dumps(repair_index(args.index), indent=2))
        return 0
    if args.verify and os.path.isdir(args.index):  # before opening: a damaged index may not open at all
        TantivyEngine.check_files(args.index)
    eng = open_engine(args.index)
    m = eng.metadata()
    if args.verify and hasattr(eng, "verify"):
        eng.verify()
        m["verified"] = True
    print(json.dumps(m, indent=2))
    return 0


def cmd_search(args) -> int:
    hits = open_engine(args.index).search(args.query, args.k)
    if args.json:
        print(json.dumps([h.to_dict() for h in hits]))
        return 0
    if not hits:  # not an error: a query of stop words only, or words no passage holds
        print(f"no passage matches {args.query!r}", file=sys.stderr)
    for i, h in enumerate(hits, 1):
        print(f"[{i}] {h.score:8.3f}  {shown(h.title)}  ({shown(h.id)})\n    {shown(h.text[:300])}")
    return 0


def _method_from_args(args):
    """The method of ``ask``/``demo``: options and index are checked before the model loads (seconds)."""
    opts = parse_options(args.option)
    if args.delta is not None and "delta" not in {f.name for f in dataclasses.fields(METHODS[args.method].Config)}:
        warn(f"--delta is not read: method {args.method!r} has no retrieval threshold (SeaKR's delta)")
    elif args.delta is not None:
        flag_or_option(opts, "delta", "--delta", args.delta)
    flag_or_option(opts, "prompt_set", "--prompt-set", getattr(args, "prompt_set", None) or None)
    spec = run_spec("--option", args.method, opts,
                    context=model_spec(args).context())  # bad options fail here, not after the load
    if not args.index and METHODS[args.method].retrieves:  # else it fails at its first search, after the load
        raise CLIError(f"--index: method {args.method!r} searches; pass --index (an index folder, an "
                       "http(s)://host:9200/INDEX URL or a corpus file; `seakr index build` makes a folder)")
    engine = open_engine(args.index) if args.index else None
    m = build_method(args.method, model_spec(args).load(), engine, config=spec.config)  # the validated config
    warn_unread_tap(m, model_spec(args).tap_given())
    return m


def cmd_ask(args) -> int:
    check_question(args.question)

    if args.index and not METHODS[args.method].retrieves:  # said, and not opened
        warn(f"--index is not read: method {args.method!r} never searches")
        args.index = None
    if args.html is not None:
        output_file(args.html, "--html", args.overwrite)
    m = _method_from_args(args)
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    if callable(getattr(m, "decisions", None)):  # SeaKR: which rule makes each decision, said once
        print("decisions: " + json.dumps(m.decisions()), file=sys.stderr)
    _answer_and_show(m, args.question, args)
    return 0


def _answer_and_show(m, question: str, args):
    """Answer with the live line, then print the answer (``--json``: with its trace) and write ``--html``."""
    live = LiveLine()
    try:
        ans = m.answer(question, listener=live)
    finally:
        live.close()
    print(json.dumps(ans.to_dict()) if args.json else ans.summary(), flush=True)  # the answer first, whatever follows
    if args.html:
        try:
            write_answer_html(ans, args.html)
        except OSError as e:
            raise CLIError(f"--html {args.html}: {e.strerror or e}") from None
        print(f"wrote {args.html}", file=sys.stderr)


#: The eval flags' defaults, told apart from a value given: a grid's key fills a flag left at its default.
FLAG_DEFAULTS = {"layout": "auto", "seed": 42, "concurrency": 1, "precision": "auto", "device": "cpu",
                 "state_source": "mlp"}


def plan_from_args(args) -> EvalPlan:
    """``seakr eval``'s flags as a checked plan; with ``--config``, the grid's runs, and its top-level keys fill
    the flags left at their defaults. The plan's one check names each setting as it was given: a flag, or the
    grid's file and key (``g.toml: key threads``, ``g.toml: [[run]] #2 (b)``)."""
    options = parse_options(args.option)
    top, runs, labels = read_grid(args.config) if args.config else ({}, [], [])

    def flag(key):  # a flag left at its default takes the grid's value
        v = getattr(args, key)
        return top[key] if key in top and v in (None, FLAG_DEFAULTS.get(key)) else v

    # a grid's [[run]] tables name the methods: a flag's method would be dropped
    if runs and (args.method is not None or options):
        given = " and ".join(f for f, v in (("--method", args.method), ("--option", options)) if v)
        raise CLIError(f"{given}: {args.config} names its runs in [[run]] tables; put the method and its options "
                       "there (or leave [[run]] out to run the flags' method)")
    if not runs:  # the flags' run: a value both as a flag and as an option is one value
        one_value(options, "delta", "--delta", args.delta)  # the plan takes the flags; the run the options
        one_value(options, "prompt_set", "--prompt-set", args.prompt_set)
        runs, labels = [run_spec("--option", args.method or "seakr", options)], ["--option"]
    # the settings the run takes from the grid, not a flag (filler: the flags' files replace the grid's)
    from_grid = {k for k in top if (not args.filler if k == "filler" else flag(k) is top[k])}
    if args.config:
        check_grid_paths(args.config, {k: top[k] for k in ("data", "index", "prompt_set", "model", "filler")
                                       if k in from_grid})
    try:
        plan = EvalPlan(data=flag("data"), out=flag("out"), runs=runs, layout=flag("layout"),
                        index=flag("index"), filler=list(args.filler) or list(top.get("filler", [])),
                        limit=flag("limit"), every=flag("every"), shard=args.shard, seed=flag("seed"),
                        prompt_set=flag("prompt_set"), delta=flag("delta"), resume=args.resume,
                        concurrency=flag("concurrency"), grid=bool(args.config),
                        model=ModelSpec(flag("model"), flag("precision"), flag("device"),
                                        flag("threads"), flag("layer"), flag("state_source")))
        if not plan.data or not plan.out:  # said in flags; the plan's check names its fields
            raise CLIError("eval: --data and --out are required (or set them in --config)")
        # a remote cluster's workers bound --threads by their own CPUs
        return plan.check(here=getattr(args, "ray", None) in (None, "local"), run_labels=labels)
    except SettingError as e:
        if e.name in from_grid:
            raise PlanError(f"{args.config}: key {e.name}: {e.text.lstrip(': ')}") from None
        raise


#: The Ray launch's flags and their values when --ray is given without them.
RAY_DEFAULTS = {"shards": 2, "cpus_per_shard": 1.0, "gpus_per_shard": 0.0}


def cmd_eval(args) -> int:
    given = [f"--{k.replace('_', '-')}" for k in RAY_DEFAULTS if getattr(args, k) is not None]
    if args.ray is None and given:  # without --ray they would be dropped and the whole file run unsharded
        raise CLIError(f"{', '.join(given)}: with --ray only (a Ray launch of N shards); one shard by hand is --shard "
                       "I/N")
    for k, v in RAY_DEFAULTS.items():
        setattr(args, k, v if getattr(args, k) is None else getattr(args, k))
    plan = plan_from_args(args)
    if args.ray is not None:
        sums = [run_shards(plan, args.shards, address=None if args.ray == "local" else args.ray,
                           num_cpus=args.cpus_per_shard, num_gpus=args.gpus_per_shard)]
    else:
        sums = run_plan(plan, checked=True)
    print(summary_markdown(sums))
    return 0


def cmd_merge(args) -> int:
    print(summary_markdown([merge_runs(args.out, args.dirs)]))
    return 0


def cmd_compare(args) -> int:
    print(compare(args.dirs))
    return 0


def cmd_export(args) -> int:
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


def cmd_demo(args) -> int:
    # a question given is checked now: "" ran the demo's own questions without a word (after the model loaded)
    questions = DEMO_QUESTIONS if args.question is None else (check_question(args.question),)
    if args.html is not None:
        output_file(args.html, "--html", args.overwrite)
    args.index = args.index or demo_index()
    print(f"index: {redact(args.index)}", file=sys.stderr)
    t = time.perf_counter()
    m = _method_from_args(args)
    load = time.perf_counter() - t
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    if callable(getattr(m, "decisions", None)):  # SeaKR: which rule makes each decision, said once
        print("decisions: " + json.dumps(m.decisions()), file=sys.stderr)
    t = time.perf_counter()
    for i, question in enumerate(questions):  # --json: one JSON document a line; --html: the last answer's page
        if i and not args.json:
            print()
        _answer_and_show(m, question, args)
    timing = f"(model load {load:.1f} s, answer{'s' * (len(questions) > 1)} {time.perf_counter() - t:.1f} s)"
    print(timing, file=sys.stderr if args.json else sys.stdout)  # --json: stdout holds only the documents
    return 0


def cmd_serve(args) -> int:
    import uvicorn

    from ..serve.app import AnswerService, ServiceLimits, check_memory, check_port, create_app, is_loopback

    token = args.token if args.token is not None else os.environ.get("SEAKR_TOKEN")
    local = is_loopback(args.host)
    limits = ServiceLimits(workers=args.workers, queue=args.queue, timeout=args.timeout, max_rows=args.max_rows,
                           max_work=args.max_work, max_kv_mb=args.max_kv_mb, max_body=args.max_body,
                           max_prompt_tokens=args.max_prompt_tokens, body_seconds=args.body_timeout, token=token,
                           docs=local if args.docs is None else args.docs, cors_origins=tuple(args.cors_origin))
    check_memory(limits, args.device or "cpu")  # before the load; the service checks on the loaded model's device
    check_port(args.host, args.port)
    try:  # the server's defaults ride in every request, so they are held to what a request may ask
        door = Door(args.method, parse_options(args.option), model_spec(args).context())
    except OptionRefused as e:
        raise CLIError(f"--option: {e} (every request carries the server's defaults)") from None
    if not local and not token:
        warn(f"serving on {args.host} without a token: anyone who can reach this address can use the model; pass "
             "--token (or SEAKR_TOKEN) and see README 'Serving'")

    index = args.index or demo_index()
    engine = open_engine(index)
    svc = AnswerService(model_spec(args).load(), engine, door, limits=limits)
    from fastapi import HTTPException

    try:
        default = svc.build_default()
        svc.check_budget(default)
    except HTTPException as e:
        raise CLIError(f"the server's own defaults exceed its limits: {e.detail}") from None

    warn_unread_tap(default, model_spec(args).tap_given())  # the server's own method; a request may choose another
    print(f"seakr serving {svc.lm.info()['model']} over {redact(index)} on http://{args.host}:{args.port}"
          f"{' (token required)' if token else ''}", file=sys.stderr)
    uvicorn.run(create_app(svc), host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_report(args) -> int:
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
