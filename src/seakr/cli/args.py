"""The `seakr` command line, as argparse sees it: every subcommand, flag, type and help text. The
commands themselves are in :mod:`seakr.cli`; each parser names its command (``cmd``)."""

from __future__ import annotations

import argparse
import os
import re
from typing import Annotated

from pydantic import Field

from ..common.console import did_you_mean, message as console
from ..common.files import user_path
from ..common.schema import Count, NonNegative, Positive, PositiveReal, Real, SchemaError, Threshold, Whole, check_type
import sys
from ..models import DEFAULT_MODEL
from ..models.machine import STATE_SOURCES
from ..serve.limits import ServiceLimits
from ..methods import METHODS
from ..eval.datasets import LAYOUTS
from ..eval.fitting import SOURCES
from ..search.corpora import FORMATS
from ..probes.probe import Folds


def _names(value: str) -> list[str]:
    """A comma-separated list of names, at least one."""
    names = [x.strip() for x in value.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {value!r}")
    return names


def given(text: str) -> str:
    """A file, folder or name typed for a flag: an empty one is refused (it would read as "not given": the default
    model, the demo index, no probe file)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty; name it, or leave the flag out for its default")
    return user_path(text)  # --index=~/idx: bash expands no ~ after "=" (a registry name or URL has none)


def path_arg(text: str) -> str:
    """A file or folder a command reads or writes: an empty one is refused, neither the current folder nor
    "not given"."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name the file or folder")
    return user_path(text)  # --out=~/runs made a folder named "~" in the working folder


def _stop(text: str) -> str:
    if not text:  # it stopped nothing, silently
        raise argparse.ArgumentTypeError("an empty stop string stops nothing")
    return text


def layer_arg(text: str) -> int:
    """``--layer``: a decoder layer's number. A probe's tap ("L11:mlp", as `probe fit` and the probe files write
    it) is refused with the flags that say it."""
    try:
        return int(text)
    except ValueError:
        m = re.fullmatch(r"\s*[Ll]?(\d+)\s*(?::\s*(\w+))?\s*", text)
        if m is None:
            raise argparse.ArgumentTypeError(f"expected a decoder layer's number, got {text!r}") from None
        also = f" --state-source {m.group(2)}" if m.group(2) else ""
        raise argparse.ArgumentTypeError(f"a layer's number, not a tap: {text!r} is --layer "
                                         f"{m.group(1)}{also}") from None


def flag(t, parse=int):
    """An argparse type that reads a flag's text as ``parse`` does and checks it against schema type ``t``, so a
    flag is refused in the words a grid, Python and HTTP use for the same setting."""

    def convert(text: str):
        try:
            v = parse(text)
        except ValueError:
            v = text  # refused by the type below, naming what it takes
        try:
            return check_type(t, v)
        except SchemaError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


Port = Annotated[Whole, Field(ge=1, le=65535)]
positive_int, count, port_number = flag(Positive), flag(Count), flag(Port)
fold_count = flag(Folds)
positive_float = flag(PositiveReal, float)
non_negative = temperature = flag(NonNegative, float)  # a temperature of 0 is greedy
probability = flag(Annotated[Real, Field(gt=0, le=1)], float)  # a nucleus mass top-p
threshold = flag(Threshold, float)  # SeaKR's delta: inf never retrieves on U, -inf always does


def typed_text(text: str) -> str:
    """A question or prompt as given; ``-`` reads it from stdin (``seakr ask - < q.txt``, a question too long or
    too quoted for the shell), its closing line end dropped. A closed stdin reads as nothing."""
    if text != "-":
        return text

    data = sys.stdin.buffer.read() if sys.stdin is not None else b""
    try:
        return data.decode("utf-8-sig").rstrip("\r\n")
    except UnicodeDecodeError as e:
        raise argparse.ArgumentTypeError(f"stdin: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                                         f"{e.start})") from None


def unescape(text: str) -> str:
    """``\\n`` and ``\\t`` in a prompt typed on one line become a newline and a tab; everything else, non-ASCII
    text included, is kept as typed (``unicode_escape`` would read UTF-8 bytes as latin-1: mojibake)."""
    return re.sub(r"\\(\\|n|t)", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], text)


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=given, default=None,
                   help=f"registry name, .gguf file or HF folder (default {DEFAULT_MODEL})")
    p.add_argument("--precision", default="auto",
                   choices=["auto", "bf16", "int8", "fp32", "fp16", "float32", "bfloat16", "float16"],
                   help="how the model computes (default auto: the packaged model's fastest precision that passed "
                        "the accuracy bar, else bf16 where native, else fp32); int8 is CPU only")
    p.add_argument("--dtype", dest="precision", help=argparse.SUPPRESS)  # the older name of --precision
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N, mps or auto")
    p.add_argument("--threads", type=positive_int, default=None)
    p.add_argument("--layer", type=layer_arg, default=None, help="0-based state layer (default L/2-1)")
    p.add_argument("--state-source", default="mlp", choices=list(STATE_SOURCES),
                   help="read the layer's feed-forward output (default, the paper's) or its residual stream")


def _add_method_args(p, methods) -> None:
    p.add_argument("--index", type=given, default=None,
                   help="index directory, http(s)://host:9200/INDEX, or a corpus file or folder (indexed once, cached)")
    p.add_argument("--method", default="seakr", choices=list(methods))
    p.add_argument("--delta", type=threshold, default=None, help="SeaKR threshold (default: calibration file)")
    p.add_argument("--prompt-set", type=given, default=None, help="hotpotqa | 2wikimultihopqa | simpleqa | FILE.json")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="any method option, e.g. estimator=energy rerank=engine max_steps=4 (repeatable)")


def _add_service_limits(p) -> None:
    d = ServiceLimits()
    p.add_argument("--workers", type=positive_int, default=d.workers, help="concurrent generations")
    p.add_argument("--queue", type=count, default=d.queue, help="requests admitted beyond the workers; more get 429")
    p.add_argument("--timeout", type=positive_float, default=d.timeout, help="seconds per request before 504")
    p.add_argument("--max-rows", type=positive_int, default=d.max_rows,
                   help=f"rows of one request's largest model call (memory; default {d.max_rows})")
    p.add_argument("--max-work", type=positive_int, default=d.max_work,
                   help=f"row-tokens of one request's calls in the worst case (time; default {d.max_work})")
    p.add_argument("--max-kv-mb", type=positive_int, default=d.max_kv_mb,
                   help=f"attention cache of one request's largest call, MB (memory; default {d.max_kv_mb})")
    p.add_argument("--max-prompt-tokens", type=positive_int, default=d.max_prompt_tokens,
                   help=f"prompt tokens of one model call in the worst case (time; default {d.max_prompt_tokens})")
    p.add_argument("--body-timeout", type=float, default=d.body_seconds, metavar="SECONDS",
                   help=f"a request body must arrive within this (default {d.body_seconds:g})")
    p.add_argument("--max-body", type=positive_int, default=d.max_body,
                   help=f"request body bytes (default {d.max_body})")
    p.add_argument("--token", default=None, help="bearer token required on every route but /v1/health "
                                                 "(default: the SEAKR_TOKEN environment variable)")
    p.add_argument("--docs", action=argparse.BooleanOptionalAction, default=None,
                   help="serve /docs and /openapi.json (default: only when bound to loopback)")
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="a web page's origin allowed to call the API from a browser, e.g. http://localhost:3000 "
                        "(repeat for more; * for any); default none")


class _Once(argparse._StoreAction):
    """A flag's one value: two different values are refused (argparse would keep the last without a word); the
    same one twice is taken."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault(_GIVEN, {})
        if self.dest in given and option_string and given[self.dest] != values:
            raise argparse.ArgumentError(self, f"given twice ({given[self.dest]!r}, then {values!r}); give it once")
        given[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


_GIVEN = "_seakr_flags_given"


_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity)$", re.IGNORECASE)


class Parser(argparse.ArgumentParser):
    """argparse with the project's error shape: one line naming the command and the problem, exit 2
    (``--help`` still prints the usage); a flag that takes one value takes it once (:class:`_Once`)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)
        # a value, not a flag: argparse reads only -5 and -5.2 as numbers; `--delta -inf` (the help's own
        # example), `--delta -1e-3` and `--delta -5.` are numbers too
        self._negative_number_matcher = _NEGATIVE_NUMBER

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown flag is refused by the command it was given to, with the nearest of its
        flags (``seakr ask --methd cot``: did you mean --method)."""
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            cmd = self._command_parser(ns)
            flags = [o for a in cmd._actions for o in a.option_strings if o.startswith("--")]
            hint = next((h for x in extra if x.startswith("-") and (h := did_you_mean(x.split("=")[0], flags))), "")
            cmd.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
        return ns

    def _command_parser(self, ns) -> "Parser":
        """The (sub)command parser ``ns`` was parsed by: ``seakr probe fit``'s, not ``seakr``'s."""
        parser = self
        while sub := next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None):
            chosen = getattr(ns, sub.dest, None)
            if chosen not in sub.choices:
                break
            parser = sub.choices[chosen]
        return parser

    def parse_known_args(self, args=None, namespace=None):
        ns, rest = super().parse_known_args(args, namespace)
        ns.__dict__.pop(_GIVEN, None)  # the record of this parse, not an argument
        return ns, rest

    def error(self, message):
        missing = message.partition("arguments are required: ")[2].split(", ")
        if any(m and not m.startswith("-") for m in missing):  # a positional: perhaps given, but read as an option
            message += " (text that starts with '-' is read as an option: put it after --, e.g. -- -1)"
        if choice := re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message):  # --layout HotpotQA
            message += did_you_mean(choice[1],
                                    [c.strip(" '") for c in choice[2].split(",")])  # quoted or not, by version
        extra = message.partition("unrecognized arguments: ")[2].split()
        if extra and all(os.path.isfile(a) for a in extra):  # `--data rc/validation-*.parquet`, expanded by the shell
            message += " (files after a flag that takes one: quote a glob, e.g. --data 'rc/validation-*.parquet')"
        self.exit(2, f"seakr: error: {self.prog}: {console(message)} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="seakr", description="Self-aware knowledge retrieval (SeaKR)")
    sub = ap.add_subparsers(dest="command", required=True)
    _uncertainty_parser(sub)
    _answer_parsers(sub)
    _eval_parsers(sub)
    _probe_parsers(sub)
    _fit_parser(sub)
    _index_parsers(sub)
    return ap


def _uncertainty_parser(sub) -> None:
    p = sub.add_parser("uncertainty", help="greedy continuation + every uncertainty estimator for one prompt")
    _add_model_args(p)
    p.add_argument("prompt", type=typed_text, help='the prompt ("-": read it from stdin)')
    p.add_argument("--k", type=positive_int, default=20, help="samples for the state-based estimators")
    p.add_argument("--temperature", type=temperature, default=1.0)
    p.add_argument("--top-k", type=positive_int, default=50)
    p.add_argument("--top-p", type=probability, default=0.9)
    p.add_argument("--max-new-tokens", type=positive_int, default=64)
    p.add_argument("--stop", action="append", type=_stop, default=None,
                   help="stop string (repeatable; replaces the default newline; \\n is a newline unless --no-escapes)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--alpha", type=positive_float, default=1e-3)
    p.add_argument("--show", type=count, default=5, help="samples to print")
    p.add_argument("--no-escapes", dest="escapes", action="store_false", help="do not interpret \\n in PROMPT")
    p.add_argument("--prompt-estimator", action="store_true", help="also ask the sufficiency question")
    p.add_argument("--json", action="store_true")
    p.set_defaults(cmd="uncertainty")


def _add_answer_output(p) -> None:
    """How ``ask`` and ``demo`` show the answer: as text or JSON, and its trace as a page."""
    p.add_argument("--json", action="store_true", help="the answer and its full trace as JSON")
    p.add_argument("--html", type=path_arg, default=None, help="also write the trace viewer page for this answer")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --html file seakr did not write")


def _answer_parsers(sub) -> None:
    p = sub.add_parser("ask", help="answer one question with SeaKR or a baseline, printing the trace")
    _add_model_args(p)
    _add_method_args(p, METHODS)
    p.add_argument("question", type=typed_text, help='the question ("-": read it from stdin)')
    _add_answer_output(p)
    p.set_defaults(cmd="ask")

    p = sub.add_parser("demo", help="answer a multi-hop question over the packaged Wikipedia corpus")
    _add_model_args(p)
    _add_method_args(p, METHODS)
    p.add_argument("question", nargs="?", default=None, type=typed_text,
                   help='default: the demo\'s multi-hop question ("-": read it from stdin)')
    _add_answer_output(p)
    p.set_defaults(cmd="demo")

    p = sub.add_parser("serve", help="HTTP service (POST /v1/answer) and the trace viewer at /")
    _add_model_args(p)
    p.add_argument("--index", type=given, default=None,
                   help="default: the demo index (an index folder, URL, corpus file or folder)")
    p.add_argument("--method", default="seakr", choices=list(METHODS))
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="server-wide method defaults")
    p.add_argument("--host", type=given, default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=port_number, default=8000)
    _add_service_limits(p)
    p.set_defaults(cmd="serve")


def _data_args(p, out_required=True, data_required=None) -> None:
    _add_model_args(p)
    p.add_argument("--data", type=given, required=out_required if data_required is None else data_required,
                   help="dataset file (HotpotQA, 2Wiki, MuSiQue, NQ, SQuAD, TriviaQA, IIRC, PopQA, FlashRAG; a CSV/TSV "
                        "with question and answer columns), a folder holding one split, or a quoted glob of a split's "
                        "shards "
                        "('rc/validation-*.parquet')")
    p.add_argument("--layout", default="auto", choices=LAYOUTS)
    p.add_argument("--index", type=given, default=None,
                   help="existing index, or a corpus file or folder; default: pool the dataset's paragraphs (cached)")
    p.add_argument("--filler", type=given, action="append", default=[],
                   help="extra corpus files (or folders of them) added to the pooled index")
    p.add_argument("--limit", type=positive_int, default=None, help="the first N questions")
    p.add_argument("--every", type=positive_int, default=None, metavar="N",
                   help="every N-th question of the file (before --limit): a subset spread over its topics")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--prompt-set", type=given, default=None)
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=path_arg, required=out_required)


def _eval_parser(sub, methods) -> None:
    """``seakr eval``: the data flags, the method (or a grid of runs), and how the questions are spread."""
    p = sub.add_parser("eval", help="run methods over a dataset (resumable JSONL, summary tables)")
    _data_args(p, out_required=False)
    p.add_argument("--method", default=None, choices=list(methods),  # None: told apart from a grid's own runs
                   help="the method (default seakr); a --config grid names its own")
    p.add_argument("--delta", type=threshold, default=None)
    p.add_argument("--resume", action="store_true", help="skip questions already in results.jsonl")
    p.add_argument("--config", type=given, default=None,
                   help="TOML file listing [[run]] entries (method, name, options) and any flag's setting; its paths "
                        "are read from the working folder")
    p.add_argument("--concurrency", type=positive_int, default=1,
                   help="questions in flight; their model calls are merged into shared decode batches")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run questions I, I+N, ... only (0 <= I < N; e.g. a Slurm array's task id); join with `seakr "
                        "merge`")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="fan --shards shards out over a Ray cluster (default: a local one); merged into OUT/merged")
    p.add_argument("--shards", type=positive_int, default=None, help="with --ray: how many shards (default 2)")
    p.add_argument("--cpus-per-shard", type=positive_float, default=None,
                   help="with --ray (default 1)")  # None: cli.RAY_DEFAULTS
    p.add_argument("--gpus-per-shard", type=non_negative, default=None, help="with --ray on GPUs: e.g. 1 (default 0)")
    p.set_defaults(cmd="eval")


def _eval_parsers(sub) -> None:
    def study(name, help, data_required=True):
        p = sub.add_parser(name, help=help)
        _data_args(p, data_required=data_required)
        p.add_argument("--resume", action="store_true", help="continue a killed study: skip the rows already in --out")
        p.set_defaults(cmd=name.replace("-", "_"))
        return p

    _eval_parser(sub, METHODS)

    p = sub.add_parser("merge", help="join the shard directories of one eval run (refuses overlaps and other runs)")
    p.add_argument("dirs", nargs="+", type=path_arg)
    p.add_argument("--out", type=path_arg, required=True)
    p.set_defaults(cmd="merge")

    p = sub.add_parser("compare", help="paper-style table of several eval run directories")
    p.add_argument("dirs", nargs="+", type=path_arg)
    p.set_defaults(cmd="compare")

    p = sub.add_parser("export", help="an eval run's predictions as an official script or leaderboard reads them")
    p.add_argument("dir", type=path_arg)
    p.add_argument("--format", default="jsonl", choices=("jsonl", "squad", "hotpotqa", "2wiki"),
                   help="jsonl: {id, prediction} lines; squad: {id: prediction} (SQuAD, TriviaQA, NQ-open scripts); "
                        "hotpotqa: {answer, sp} (sp empty); 2wiki: {answer, sp, evidence} (both empty)")
    p.add_argument("--out", type=path_arg, default=None, help="file to write (default or -: stdout)")
    p.set_defaults(cmd="export")

    p = study("calibrate", "sweep delta on a dev file, plot F1/retrieval rate, write the model's calibration",
              data_required=False)
    p.add_argument("--from-runs", nargs=2, type=path_arg, metavar=("NEVER", "ALWAYS"), default=None,
                   help="multi-hop: two eval runs of SeaKR on tuning questions, delta=inf and retrieval=always "
                        "(benchmarks/configs/calibrate-multihop.toml)")
    p.add_argument("--k", type=positive_int, default=None)
    p.add_argument("--n-candidates", type=positive_int, default=None)
    p.add_argument("--no-write", action="store_true", help="do not write the calibration file")
    p = study("detect", "answers + every estimator: AUROC/PCC for incorrectness, ROC plot")
    p.add_argument("--setting", default="closed-book", choices=["closed-book", "open-book"],
                   help="open-book: the question with its gold passage(s) (NQ oracle, SQuAD, HotpotQA, 2Wiki)")
    p.add_argument("--probe", type=given, default=None, metavar="TAPS",
                   help="also score EigenScore at these states, from the same samples: all, mlp, residual or "
                        "LAYER:SOURCE,... (0-based layers), each at k=5, 10, 20 (those below the option k, and k)")
    p.add_argument("--form", default="cot", choices=["cot", "short"],
                   help="cot: SeaKR's answer prompt (demonstrations, chain of thought); short: the knowledge check "
                        "(a short answer, no demonstrations)")
    p.add_argument("--probe-file", type=given, default=None,
                   help="a fitted probe (seakr probe fit): adds its P(wrong) as 'probe'")
    study("rerank-study", "recall@1 of gold paragraphs: engine order vs self-aware re-ranking")

    p = sub.add_parser("report", help="HTML report of an eval directory (tables, calibration and ROC plots)")
    p.add_argument("dir", type=path_arg)
    p.add_argument("--out", type=path_arg, default=None, help="page to write (default DIR/report.html; -: stdout)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file seakr did not write")
    p.set_defaults(cmd="report")


def _probe_parsers(sub) -> None:
    p = sub.add_parser("probe", help="fit learned probes and calibration maps on detect studies of tuning data")
    psub = p.add_subparsers(dest="probe_command", required=True)
    f = psub.add_parser("fit", help="a logistic probe on the greedy answer's state; the best tap by cross-validation")
    f.add_argument("runs", nargs="+", type=path_arg,
                   help="detect studies (re-rank studies for --form candidate, SeaKR eval runs for "
                   "--form final-rationale / final-knowledge); tuning data only")
    f.add_argument("--tap", default="best", help="best (every stored tap) or LAYER:SOURCE such as L11:mlp")
    f.add_argument("--form", default="short", choices=list(SOURCES))
    f.add_argument("--folds", type=fold_count, default=5)
    f.add_argument("--features", type=_names, default=[],
                   help="short form: estimators of the check's own samples to read beside the state, e.g. "
                        "eigen,ln-entropy,max-entropy (a stacked probe; the check then draws k samples)")
    f.add_argument("--out", type=path_arg, required=True, help="probe file to write (.json)")
    f.set_defaults(cmd="probe_fit")
    c = psub.add_parser("calibrate", help="map one estimator's scores to P(correct) (isotonic or Platt)")
    c.add_argument("runs", nargs="+", type=path_arg, help="detect study directories (tuning data only)")
    c.add_argument("--estimator", required=True, help="a score name in the rows, e.g. eigen, max-entropy, probe")
    c.add_argument("--form", default="short", choices=[f for f in SOURCES if f != "candidate"])
    c.add_argument("--kind", default="isotonic", choices=["isotonic", "platt"])
    c.add_argument("--out", type=path_arg, required=True, help="calibration file to write (.json)")
    c.set_defaults(cmd="probe_calibrate")
    g = psub.add_parser("gate", help="choose the knowledge check's gate level on tuning runs (F1 against it)")
    g.add_argument("--check", nargs="+", type=path_arg, required=True,
                   help="detect studies of the check (--form short) on tuning data")
    g.add_argument("--chain", nargs="+", type=path_arg, required=True,
                   help="SeaKR eval runs retrieving at every step on the same questions")
    g.add_argument("--gate", default="check", choices=["check", "probe"])
    g.add_argument("--model", type=given, default=None,
                   help="whose fitted files to read (default: the check studies' model)")
    g.add_argument("--probes", type=given, default=None, help="folder of fitted files (default: the package's)")
    g.add_argument("--out", type=path_arg, required=True, help="JSON file for the trade-off curve and the chosen level")
    g.add_argument("--save-level", action="store_true",
                   help="also write the chosen level into --probes DIR's gates.json, where a run with probes=DIR reads "
                        "it")
    g.set_defaults(cmd="probe_gate")


def _fit_parser(sub) -> None:
    p = sub.add_parser("fit", help="fit every signal SeaKR's defaults read for a model, on train files, in one "
                                   "resumable run (probe, maps, gate levels, a one-page report)")
    _add_model_args(p)
    p.add_argument("--train", nargs="+", type=given, required=True, metavar="FILE",
                   help="train files (never the questions you report); those with paragraphs also run the chain")
    p.add_argument("--out", type=path_arg, required=True, help="the folder of fitted files (a run's probes=DIR)")
    p.add_argument("--limit", type=positive_int, default=400, help="the first N questions of each file, halved "
                   "into A (the probe and maps) and B (the gate level)")
    p.add_argument("--every", type=positive_int, default=None, metavar="N")
    p.add_argument("--index", type=given, default=None,
                   help="the chain's corpus (default: each file's paragraphs pooled)")
    p.add_argument("--filler", type=given, action="append", default=[])
    p.add_argument("--taps", default="own", choices=("own", "all"),
                   help="the probe's states: the model's own layer, or every layer's (the best by cross-validation; "
                        "slower)")
    p.add_argument("--folds", type=fold_count, default=5)
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="how the model samples and asks (k, temperature, ...), for every stage")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--budget", type=positive_float, default=None, metavar="MINUTES",
                   help="stop after the first questions if the projected time is longer")
    p.add_argument("--dev-ids", type=given, action="append", default=[], metavar="FILE",
                   help="lists of dev ids (or questions), one a line, a train file must not hold (default: "
                        "$SEAKR_DEV_IDS, paths joined by the path separator)")
    p.add_argument("--resume", action="store_true", help="continue a killed fit")
    p.set_defaults(cmd="fit")


def _index_parsers(sub) -> None:
    p = sub.add_parser("index", help="build or inspect a search index")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="stream corpora into a new index (atomic) or add to one")
    b.add_argument("sources", nargs="*", type=path_arg,
                   help="corpus files, or folders of them; - for stdin, with --format (none with --format "
                        "wiki-offline: "
                        "the demo corpus)")
    b.add_argument("--format", action="append", choices=FORMATS, default=None,
                   help="one for all sources or one per source (default auto)")
    b.add_argument("--out", type=path_arg, required=True,
                   help="index directory, or http://host:9200/INDEX with --engine elasticsearch")
    b.add_argument("--engine", choices=["tantivy", "elasticsearch"], default=None,
                   help="default: elasticsearch for an http(s):// --out, else tantivy")
    b.add_argument("--overwrite", action="store_true",
                   help="build a new generation over an existing seakr index (its other files are kept)")
    b.add_argument("--add", action="store_true", help="incremental add to an existing index")
    b.add_argument("--passage-words", type=positive_int, default=None, metavar="N",
                   help="cut each document longer than N words into passages of N words (DPR's are 100), each under "
                        "its title, ids ID#1, ID#2, ...; default: passages as given")
    b.set_defaults(cmd="index_build")
    i = isub.add_parser("info", help="manifest of an index (document count, analyzer, checksum)")
    i.add_argument("index", type=path_arg)
    i.add_argument("--verify", action="store_true", help="check every index file and recompute the document checksum")
    i.add_argument("--repair", action="store_true",
                   help="clear what a killed build or add left, and rebuild a damaged cached corpus index")
    i.set_defaults(cmd="index_info")

    p = sub.add_parser("search", help="BM25 top-k for one query")
    p.add_argument("index", type=path_arg, help="index directory or http(s)://host:port/INDEX")
    p.add_argument("query")
    # --k as the other commands spell it ("unrecognized arguments: --k 5", naming no command, before)
    p.add_argument("-k", "--k", type=positive_int, default=3, help="passages to show (default 3)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(cmd="search")
