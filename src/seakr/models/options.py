"""How a model loads: one schema (:class:`LoadOptions`) for the options of ``load_model`` and
:class:`~seakr.models.hf.HFLanguageModel`, which ``SeaKR.from_config`` and the framework components pass on, and
whose types the command line's and a grid's model settings (:class:`~seakr.eval.specs.ModelSpec`) share. Each
value is refused in one line naming it before any weights are looked for; whether this machine has the device,
and whether the layer is below the model's depth, are the loader's to say (they need the machine and the model)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from ..common.console import did_you_mean
from ..common.schema import Count, Positive, Said, Whole, schema
from .machine import PRECISIONS, STATE_SOURCES, device_name, precision_name, too_many_threads

#: How the model loads, set beside a method's options but not one of them: (flag, a grid's top-level key, the
#: Python keyword of ``load_model`` and ``SeaKR.from_config``).
MODEL_OPTIONS = {"precision": ("--precision", "precision", "precision"), "device": ("--device", "device", "device"),
                 "threads": ("--threads", "threads", "threads"), "layer": ("--layer", "layer", "state_layer"),
                 "state_layer": ("--layer", "layer", "state_layer"),
                 "state_source": ("--state-source", "state_source", "state_source")}

#: A device as the settings spell it (cpu:0 is cpu; whether this machine has it is the loader's to say).
DEVICE = re.compile(r"(cpu|cuda|mps)(:\d+)?|auto")


def _device(v: str) -> str:
    if not DEVICE.fullmatch(v):
        raise ValueError(f"{v!r}: expected cpu, cuda, cuda:N (N a GPU number), mps or auto")
    return device_name(v)


def _precision(v: str) -> str:
    if precision_name(v) not in PRECISIONS:
        choices = (*PRECISIONS, "fp32", "bf16", "fp16")
        raise ValueError(f"{v!r}: expected {', '.join(PRECISIONS)} (or fp32, bf16, fp16){did_you_mean(v, choices)}")
    return v


def _on_this_machine(v: int | None) -> int | None:
    """More torch threads than the CPUs this process may use only contend (1000 on 2 CPUs ran 100x slower)."""
    if v is not None and (why := too_many_threads(v)):
        raise ValueError(f"{v}: {why}")
    return v


#: ``auto``, a float precision or int8, by its full name or its alias (fp32, bf16, fp16).
Precision = Annotated[str, AfterValidator(_precision), Said("a precision", "precisions")]
#: cpu, cuda, cuda:N, mps or auto, as text.
Device = Annotated[str, AfterValidator(_device), Said("a device (cpu, cuda, cuda:N, mps or auto)", "devices")]
#: A 0-based decoder layer.
Layer = Count
StateSource = Literal[STATE_SOURCES]
#: How many tokens a greedy call guesses from its prompt a forward (0: none).
DraftTokens = Annotated[Whole, Field(ge=0, le=64)]


def _unknown_option(cls: type, names: list[str]) -> str:
    """An option ``load_model`` does not take, with the nearest it does (``layer=``, the command line's
    ``--layer``, is ``state_layer=``)."""
    allowed = list(cls.__pydantic_fields__)

    def hint(k: str) -> str:
        if k in MODEL_OPTIONS and MODEL_OPTIONS[k][2] != k:
            return f" (did you mean {MODEL_OPTIONS[k][2]!r}?)"
        return did_you_mean(k, allowed) or f"; allowed: {', '.join(allowed)}"

    return "; ".join(f"load_model: unknown option {k!r}{hint(k)}" for k in names)


@schema("option", _unknown_option)
class LoadOptions:
    """How a model computes and where its states are read (see :class:`~seakr.models.hf.HFLanguageModel`)."""

    precision: Precision = "auto"
    dtype: Precision = "auto"  # the older name of precision: read where precision is "auto"
    device: Device = "cpu"
    threads: Annotated[Positive | None, AfterValidator(_on_this_machine)] = None  # None: SEAKR_THREADS, else every CPU
    state_layer: Layer | None = None  # None: L/2 - 1
    state_source: StateSource = "mlp"
    prefix_cache_size: Count = 4
    prompt_cache_size: Count = 4
    packed_linear: bool | None = None
    fast_step: bool = True
    attention: Literal["shared", "hf"] | None = None  # None: SEAKR_ATTENTION, else shared
    cuda_graphs: bool | None = None  # None: SEAKR_CUDA_GRAPHS, else on where it applies
    draft_tokens: DraftTokens | None = None  # None: SEAKR_DRAFT_TOKENS, else 10 on a float32 CPU, else 0
    exact_logits: bool = False  # a 16-bit model's likeliest logits in float32 (models/head.py; off: its decision)


#: The keywords that load a model rather than configure a method (``SeaKR.from_config(..., threads=2)``).
LOAD_KEYS = frozenset(LoadOptions.__pydantic_fields__)
