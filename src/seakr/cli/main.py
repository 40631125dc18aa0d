"""The `seakr` command: each command reads its flags (:mod:`seakr.cli.args`), calls the public API and
prints. No algorithm and no method or dataset default lives here: an evaluation is an
:class:`~seakr.eval.plan.EvalPlan`, whose defaults every door (this command, Ray, Python) shares."""

from __future__ import annotations

import os
import sys

from .args import build_parser
from ..common.console import message
from ..common.writing import REFUSED_WRITES
from ..eval.specs import SettingError, check_settings
from .shell import (NamedOutput, OutputRefused, Stopped, disk_refused, interrupted, os_said, out_of_memory,
                    path_refused, printable_output, stdout_to_null, stop_on_sigterm, warnings_as_notes)
from . import commands, studies
from .flags import CLIError, model_spec
from ..models.registry import ModelError
from ..search.base import SearchError


def main(argv: list[str] | None = None) -> int:
    printable_output()
    warnings_as_notes()
    stdout, sys.stdout = sys.stdout, NamedOutput(sys.stdout)
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
        with stop_on_sigterm(args.cmd != "serve"):  # the server shuts down gracefully on SIGTERM by itself
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
        stdout_to_null()
        return 141  # 128 + SIGPIPE, what a shell reports for a tool the pipe stopped
    except OutputRefused as e:  # the command's files are written as they go; what it printed is what was lost
        stdout_to_null()
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


def precheck(args) -> None:
    """Flags whose mistakes would otherwise surface only after the model has loaded (a minute on a CPU):
    the device's spelling, the state layer against a packaged model's depth, the seed's range, a
    prompt-set file. Each gets one line naming the flag. ``eval``'s plan checks these itself, naming each as it
    was given (a flag, or a grid's key)."""
    if args.cmd == "eval":
        return
    if getattr(args, "device", None) is not None:
        model_spec(args).check()
    check_settings(getattr(args, "seed", None), getattr(args, "prompt_set", None))


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean "the input is wrong", as opposed to a fault in seakr or the machine.
    ``ValueError`` covers our validation (options, datasets, corpora, missing model capabilities)."""
    return (CLIError, ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
            ModelError, SearchError)


#: every command by name: ``cmd_index_build`` answers ``seakr index build``
COMMANDS = {name[4:]: f for mod in (commands, studies) for name, f in vars(mod).items() if name.startswith("cmd_")}
