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

    return ap


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = build_parser().parse_args(argv)
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
