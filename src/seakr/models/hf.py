"""Hugging Face causal LMs with SeaKR's state vector, in our own batched decode loop.

Why our own loop instead of ``transformers.generate``: one call must serve a greedy row and k sampled
rows of *several* prompts (the N re-rank candidates), read one layer's output at an EOS fed in place of
the stop-trigger token, and stop paying for a row as soon as it hits its stop string. A call is:

1. prefill each prompt once, its demonstration prefix from a per-process KV cache (``prefill.py``);
2. decode all rows of all prompts together, each prompt's KV shared by its rows (``decode.py``,
   ``attention.py``); per step the sampler picks each row's token (``sampling.py``) and the row book
   records it and decides which rows are done (``rows.py``);
3. a row that stops is fed EOS *instead of* its last token; the state layer's output at that step is
   its state vector, and the row leaves the batch.

CPU-only speed-ups sit behind one seam (``speedups.py``). Greedy rows are token-identical to
``transformers.generate(do_sample=False)`` (tested in fp32).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import numpy as np

from ..common.console import first_line, said
from . import speedups
from .attention import has_sliding_window, install, text_config
from .base import (ATTENTION, CHAT, GENERATE, NEXT_TOKEN, STATES, Generation, GenerationConfig, check_generate,
                   check_text,
                   check_texts)
from .decode import CacheBackend, SharedPrefixBackend, decode
from .head import install as install_exact_head
from .lookup import draft_depths, drafts, lookup_decode
from . import graphs
from .graphs import GraphedBackend
from .prefill import Prefilled, Prefiller
from .kernels import int8_available
from .figures import model_depth
from .options import LoadOptions
from ..common.cache import cache_root
from .registry import DEFAULT_MODEL, ModelError, REGISTRY, resolve
from .rows import RowBook
from .sampling import uniform_streams
from .machine import (PRECISIONS, STATE_SOURCES, available_cpus, check_layer, default_threads,  # noqa: F401
                      free_memory, precision_name, resolve_device)


def _safetensors_errors() -> tuple[type[Exception], ...]:
    try:
        from safetensors import SafetensorError

        return (SafetensorError,)
    except ImportError:  # pragma: no cover - transformers depends on safetensors
        return ()


def choose_precision(precision: str, model: str | None, device) -> str:
    """The effective precision: an explicit one as named (the load schema, ``LoadOptions``, took only known names),
    ``"auto"`` resolved for ``model`` on ``device``."""
    p = precision_name(precision)
    if p != "auto":
        note = speedups.emulation_note(p, device)
        if note:  # it runs, and the user who asked for it hears what it costs here
            warnings.warn(note, speedups.EmulatedPrecisionWarning, stacklevel=_first_caller_outside_seakr())
        return p
    fast = getattr(REGISTRY.get(model or ""), "fast_precision", None)
    if fast == "int8" and device.type == "cpu" and int8_available():
        return "int8"
    return native_float(device)


def _first_caller_outside_seakr() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside this package: the user's
    ``load_model(...)`` or ``HFLanguageModel(...)`` line, however many of our frames lie between."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1  # level 1: the function that calls warnings.warn
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def _env_choice(name: str, choices: tuple[str, ...], default: str | None = None) -> str | None:
    """An environment variable that takes one of ``choices``, refused naming the variable (a "yes" or an empty
    value is not silently read as one of them)."""
    v = os.environ.get(name, default)
    if v not in choices:
        raise ValueError(f"{name}={said(v)}: expected {' or '.join(choices)}")
    return v


def native_float(device) -> str:
    """The float precision the device computes natively (see :func:`speedups.default_dtype`)."""
    return str(speedups.default_dtype(device)).replace("torch.", "")


def shared_prefix(prompts: Sequence[str], prefix: str, min_gain: int = 64) -> str:
    """The longest text every prompt starts with, cut just after a newline that every prompt follows
    with a non-space character (a boundary where most tokenizers split the whole as they split the two sides
    apart; where one does not, the prefiller serves the cached tokens that agree). ``prefix`` when that gains
    fewer than ``min_gain`` characters."""
    common = os.path.commonprefix(list(prompts))
    cut = len(common)
    while cut > len(prefix):
        cut = common.rfind("\n", len(prefix), cut)
        if cut < 0:
            break
        if all(len(p) > cut + 1 and not p[cut + 1].isspace() for p in prompts):
            return common[: cut + 1] if cut + 1 - len(prefix) >= min_gain else prefix
    return prefix


#: Where decoder blocks keep their feed-forward part (Llama, Qwen, Gemma, GPT-2, Falcon: ``mlp``; others).
MLP_NAMES = ("mlp", "feed_forward", "ffn", "block_sparse_moe")
#: Blocks that hold their feed-forward linears directly (OPT, XGLM, BioGPT): the second one's output is the FFN
#: output. OPT is one of the models INSIDE's EigenScore was defined on.
FFN_OUT_NAMES = ("fc2",)


def decoder_blocks(model, depth: int, name: str) -> list:
    """The ``depth`` decoder blocks of a causal LM, found where its family keeps them (``model.layers`` in
    Llama-style models, ``transformer.h`` in GPT-2-style ones)."""
    import torch

    inner = model.get_decoder() if hasattr(model, "get_decoder") else model
    for attr in ("layers", "h", "blocks", "layer"):
        blocks = getattr(inner, attr, None)
        if isinstance(blocks, torch.nn.ModuleList) and len(blocks) == depth:
            return list(blocks)
    lists = [m for m in inner.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == depth]
    if len(lists) == 1:
        return list(lists[0])
    raise ModelError(f"{name}: cannot find its {depth} decoder blocks ({type(model).__name__}); seakr reads states "
                     "from decoder-only models (Llama, Qwen, Gemma, GPT-2 and their kin)")


def tap_module(blocks: list, layer: int, source: str, name: str):
    """The module whose output is the state at (``layer``, ``source``): the block's feed-forward part (or the
    last linear of it, where the block holds the FFN's linears itself), or the block itself (the residual stream
    after it)."""
    block = blocks[layer]
    if source != "mlp":
        return block
    for attr in MLP_NAMES + FFN_OUT_NAMES:
        if getattr(block, attr, None) is not None:
            return getattr(block, attr)
    raise ModelError(f"{name}: its decoder blocks ({type(block).__name__}) have no feed-forward module named "
                     f"{', '.join(MLP_NAMES + FFN_OUT_NAMES)}; read the residual stream instead (state_source="
                     "'residual' in Python, --state-source residual on the command line)")


def check_vocabulary(model, tokenizer, name: str) -> None:
    """Every token the tokenizer can produce has a row in the model's embedding (a model may hold more, padded;
    fewer means a folder pairing a tokenizer with another model's weights, which would fail at the first
    question). The base vocabulary is compared: a tokenizer's added tokens past the rows (an image placeholder)
    are ones text does not produce."""
    rows = model.get_input_embeddings().num_embeddings
    n = getattr(tokenizer, "vocab_size", None)
    if isinstance(n, int) and n > rows:
        raise ModelError(f"{name}: its tokenizer has {n} tokens and the model embeds {rows}: they do not belong "
                         "together")


def check_causal(model, name: str) -> None:
    """A causal LM's first position does not see the second: two inputs that differ only there give the same
    first-position scores. An encoder (BERT) loads as a "causal LM" all the same and attends both ways, so every
    answer and state would read text the model was not supposed to have seen yet."""
    import torch

    vocab = model.get_input_embeddings().num_embeddings
    ids = torch.tensor([[1 % vocab, 2 % vocab], [1 % vocab, 3 % vocab]], device=next(model.parameters()).device)
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    if not torch.allclose(logits[0, 0], logits[1, 0], rtol=1e-3, atol=1e-3):
        raise ModelError(f"{name}: not a causal language model ({type(model).__name__} reads each token's following "
                         "ones); seakr needs a decoder-only model")


def end_tokens(eos_id: int, model) -> tuple[int, ...]:
    """Every token that ends an answer: the EOS, and those the model's generation config lists (as
    ``transformers.generate`` stops on). Gemma-3 and Llama-3 instruct models end a turn with a token of their own
    (``<end_of_turn>``, ``<|eot_id|>``) beside the tokenizer's EOS, and decoding stops there, not at the token
    limit."""
    listed = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    listed = listed if isinstance(listed, (list, tuple)) else [] if listed is None else [listed]
    vocab = getattr(text_config(model), "vocab_size", None) or float("inf")  # an id past the logits ends nothing
    return tuple(dict.fromkeys([eos_id, *(int(t) for t in listed if 0 <= int(t) < vocab)]))


def check_attention(model, name: str) -> None:
    """A transformer: seakr decodes with a key-value cache per attention layer. A state-space model (Mamba), a
    hybrid (Jamba: Mamba layers between attention layers, told by their ``A_log`` parameter), LFM2's
    convolution layers and Qwen3-Next's linear attention (told by the cache layers transformers gives them) all
    load as causal LMs, and are refused at load rather than inside the first forward."""
    if getattr(text_config(model), "num_attention_heads", None) is None:
        raise ModelError(f"{name}: {type(model).__name__} has no attention layers (a state-space or recurrent model); "
                         "seakr decodes with a key-value cache per attention layer, so it runs transformer decoders")
    kinds = _recurrent_layer_kinds(model)
    if kinds or any(hasattr(m, "A_log") for m in model.modules()):
        said = f" ({', '.join(kinds)})" if kinds else ""
        raise ModelError(f"{name}: {type(model).__name__} has state-space, convolution or linear-attention layers"
                         f"{said} beside its attention (a hybrid); seakr decodes with a key-value cache per attention "
                         "layer, so it runs transformer decoders")


def _recurrent_layer_kinds(model) -> list[str]:
    """The layer kinds of the model's config that transformers caches as a recurrent state, not keys and values."""
    try:
        from transformers.cache_utils import (DYNAMIC_LAYER_TYPE_MAPPING, LinearAttentionCacheLayerMixin,
                                              get_layer_types_and_kwargs)
        kinds, _ = get_layer_types_and_kwargs(text_config(model))
    except (ImportError, AttributeError, TypeError, ValueError):  # a transformers without the mapping: A_log tells
        return []
    return sorted({k for k in kinds if isinstance(DYNAMIC_LAYER_TYPE_MAPPING.get(k), type)
                   and issubclass(DYNAMIC_LAYER_TYPE_MAPPING[k], LinearAttentionCacheLayerMixin)})


class HFLanguageModel:
    """A transformers causal LM behind the :class:`~seakr.models.base.LanguageModel` protocol.

    Args:
        model: registry name (``smollm2-135m``, ``qwen2.5-coder-0.5b`` ...), a ``.gguf`` file or a HF folder.
        precision: how the model computes: ``"float32"``, ``"bfloat16"``, ``"float16"``, ``"int8"`` (int8
            weights x dynamic int8 activations in every linear, the rest in bf16 where native; CPU
            only) or ``"auto"``: the packaged model's measured fastest precision that passed the
            accuracy bar (``benchmarks/results/precision_*.json``), else bf16 where the device
            computes it natively, else float32. Aliases: fp32, bf16, fp16.
        dtype: the older name of ``precision`` (float precisions only); used when ``precision`` is "auto".
        device: ``"cpu"`` (default), ``"cuda"``, ``"cuda:N"``, ``"mps"`` or ``"auto"``.
        threads: torch intra-op threads (default: ``SEAKR_THREADS`` or the CPUs available to the process).
        state_layer: 0-based decoder layer whose output is the state vector; default ``L//2 - 1``
            (the reference's layer 15 of 32, "the middle layer").
        state_source: ``"mlp"`` (FFN sub-layer output, as the reference) or ``"residual"`` (the
            decoder layer's residual-stream output, an ablation).
        prefix_cache_size: how many demonstration prefixes keep their KV cache in memory.
        prompt_cache_size: how many of each answer's recent prompts keep theirs, for its next prompt that begins
            as one of them does (a chain's next step, its final answer); 0 keeps none.
        packed_linear: pre-pack bf16 weights into oneDNN's blocked layout (speedups.py): ``None``
            (default) packs where the CPU runs bf16 natively, ``False`` keeps ``F.linear``.
        fast_step: decode Llama/Qwen2 steps outside transformers' modules (speedups.py).
        attention: ``"shared"`` (each prompt's KV shared by its rows, where the architecture allows) or
            ``"hf"`` (transformers' cache path; the reference the shared path is tested against).
            Default: ``SEAKR_ATTENTION`` or ``"shared"``.
        cuda_graphs: replay each decode call's step from a CUDA graph (graphs.py): ``None`` (default) does
            where the device is CUDA and the fast step applies, unless ``SEAKR_CUDA_GRAPHS=0``; ``False`` never.
        draft_tokens: how many tokens a greedy call guesses from its prompt and checks in one forward
            (lookup.py): the same text up to the rounding of a wider product. Default: ``SEAKR_DRAFT_TOKENS``, else
            10 on a CPU for every call in float32 and for a final answer's in any precision, and 0 elsewhere (in
            bf16 the rounding moves a chain's step now and then; on a GPU the one-token step is a CUDA graph's).
        exact_logits: recompute a 16-bit model's likeliest logits in float32 (head.py): a greedy choice and a
            log-prob are then the float32 product's of the same hidden state. Off by default (its decision).
        options: these as one :class:`~seakr.models.options.LoadOptions` already checked (``load_model``'s); the
            keywords, held to the same schema, are read where it is not given and override it where it is.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, options: LoadOptions | None = None, _modules=None, **kwargs):
        if options is None:
            options = LoadOptions(**kwargs)
        elif kwargs:  # held to the schema with the keywords over the options given
            options = dataclasses.replace(options, **kwargs)
        o = options
        if o.state_layer is not None:  # its upper bound where known without the weights
            check_layer(o.state_layer, depth=model_depth(model))
        # the environment's, named as the variable that set it, or nobody finds it; before the weights load
        attention = o.attention or _env_choice("SEAKR_ATTENTION", ("shared", "hf"), default="shared")
        cuda_graphs = o.cuda_graphs if o.cuda_graphs is not None else \
            _env_choice("SEAKR_CUDA_GRAPHS", ("1", "0"), default="1") == "1"
        import torch

        self._torch = torch
        torch.set_num_threads(default_threads() if o.threads is None else o.threads)
        self.device = resolve_device(o.device)
        self.precision = choose_precision(o.precision if o.precision != "auto" else o.dtype,
                                          model if _modules is None else None, self.device)
        # int8 runs its linears in int8 and everything else in the native float
        self.dtype = native_float(self.device) if self.precision == "int8" else self.precision
        self.draft_tokens, self.final_draft_tokens = draft_depths(o.draft_tokens, self.precision, self.device.type)
        t0 = time.time()
        self._load(model, _modules)
        self._setup_state(o.state_layer, o.state_source)
        shared = attention == "shared" and install(self.model)
        self.exact_head = install_exact_head(self.model) if o.exact_logits else None  # before packing frees its weight
        self.speedups = speedups.apply(self.model, state_layer=self.state_layer, state_source=o.state_source,
                                       shared_attention=shared, packed_linear=o.packed_linear, fast_step=o.fast_step,
                                       int8=self.precision == "int8")
        self.shared_attention = shared
        self.cuda_graphs = bool(cuda_graphs and shared and self.speedups.fast_step is not None
                                and self.device.type == "cuda")
        self.load_seconds = time.time() - t0
        # prefill_seconds: of the model's seconds, those spent prefilling (the rest is decoding)
        self.stats = {"prefill_tokens": 0, "prefix_hits": 0, "prompt_hits": 0, "decode_steps": 0, "generated_tokens": 0,
                      "drafted_tokens": 0, "accepted_tokens": 0,
                      "calls": 0, "prefill_seconds": 0.0, "seconds": 0.0}
        self._lock = threading.RLock()  # see _exclusive
        self.prefill = Prefiller(self.model, self.encode, in_place=shared, keep_cache=self._sliding,
                                 cache_size=o.prefix_cache_size, recent=o.prompt_cache_size, stats=self.stats,
                                 context=getattr(text_config(self.model), "max_position_embeddings", None))

    def _load(self, model: str, modules) -> None:
        torch = self._torch
        if modules is not None:  # an already-built (model, tokenizer), e.g. a tiny random model in tests
            self.model, self.tokenizer = modules
            self.name = getattr(self.model.config, "name_or_path", "custom") or "custom"
            self.source = {"name": "custom"}
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            path, self.source = resolve(model, self.precision)
            self.name = model
            cached = self.source.get("sha256") is not None and cache_root() in Path(path).parents
            try:  # never a folder's own Python code: transformers asked "run the custom code? [y/N]" on stdin
                self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
                self.model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, self.dtype),
                                                                  trust_remote_code=False)
            except (OSError, ValueError, KeyError, ImportError) + _safetensors_errors() as e:
                hint = f"; it is seakr's converted cache: delete {path} and it is rebuilt" if cached else ""
                if "custom code" in str(e):
                    hint = ("; seakr runs the architectures transformers ships and never a model folder's own code "
                            "(its config's auto_map)")
                raise ModelError(f"{path}: cannot load the model ({type(e).__name__}: {first_line(e)}){hint}") from None
        self.model = self.model.to(device=self.device, dtype=getattr(torch, self.dtype)).eval()

    def _setup_state(self, state_layer: int | None, state_source: str) -> None:
        cfg = text_config(self.model)
        self.num_layers = cfg.num_hidden_layers
        # the paper's middle layer, L/2 (1-based); a one-layer model's only layer
        self.state_layer = max(self.num_layers // 2 - 1, 0) if state_layer is None else state_layer
        check_layer(self.state_layer, depth=self.num_layers)
        self.state_source = state_source
        self._taps = [(self.state_layer, state_source)]
        eos = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else cfg.eos_token_id
        if isinstance(eos, (list, tuple)):
            eos = eos[0] if eos else None
        if eos is None:  # a tokenizer without one: said here
            raise ModelError(f"{self.name}: neither its tokenizer nor its config names an end-of-sequence token, which "
                             "ends every answer and marks where each sample's state is read; set eos_token in the "
                             "tokenizer's files")
        self.eos_id = int(eos)
        self.end_ids = end_tokens(self.eos_id, self.model)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        self._sliding = has_sliding_window(cfg)
        check_vocabulary(self.model, self.tokenizer, self.name)
        check_attention(self.model, self.name)
        check_causal(self.model, self.name)
        self._blocks = decoder_blocks(self.model, self.num_layers, self.name)
        tap_module(self._blocks, self.state_layer, state_source, self.name)  # the model's own tap exists

    def _tap_modules(self) -> list:
        return [tap_module(self._blocks, li, src, self.name) for li, src in self._taps]

    @contextmanager
    def probing(self, taps: Sequence[tuple[int, str]]):
        """Within the block every sample's state is a (len(taps), d) stack, read at each (layer,
        source) of ``taps`` from the same forward: one generation scores every candidate layer, so
        the state choice is measured rather than assumed (the probe study). Outside it: the
        model's one state, as before."""
        for li, src in taps:
            if not 0 <= li < self.num_layers or src not in STATE_SOURCES:
                raise ValueError(f"probe tap ({li}, {src!r}): layer must be in 0..{self.num_layers - 1}, source mlp or "
                                 "residual")
        fast = self.speedups.fast_step
        saved = self._taps
        self._taps = [(int(li), src) for li, src in taps]
        if fast is not None:
            fast.taps = self._taps
        try:
            yield self
        finally:
            self._taps = saved
            if fast is not None:
                fast.taps = saved

    # ---------------------------------------------------------------- tokens and capabilities
    def encode(self, text: str, special: bool = True) -> list[int]:
        ids = self.tokenizer.encode(text, add_special_tokens=special)
        bos = self.tokenizer.bos_token_id
        # a chat template writes the BOS into the text (Gemma, Llama 3) and the tokenizer adds its own: two BOS
        # tokens are a start the model never saw in training, so one goes
        if special and bos is not None and ids[:2] == [bos, bos] and text.startswith(self.tokenizer.bos_token):
            ids = ids[1:]
        # a tokenizer set to append its EOS (add_eos_token in some Llama-2 fine-tunes) would end every prompt there,
        # telling the model the text is over before it continues it
        if special and ids and self._appends_eos:
            ids = ids[:-1]
        return ids

    @functools.cached_property
    def _appends_eos(self) -> bool:
        eos, probe = self.tokenizer.eos_token_id, self.tokenizer.encode("a", add_special_tokens=True)
        bare = self.tokenizer.encode("a", add_special_tokens=False)
        return eos is not None and probe[-1:] == [eos] and bare[-1:] != [eos]

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    @property
    def chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    @property
    def capabilities(self) -> frozenset[str]:
        return frozenset({GENERATE, STATES, ATTENTION, NEXT_TOKEN} | ({CHAT} if self.chat_template else set()))

    def format_chat(self, messages: list[dict]) -> str:
        """The tokenizer's chat template over ``messages``, ready for the assistant's turn. A template that refuses
        a system turn (Gemma 1 and 2: "System role not supported", raised from inside the template) gets the
        system text at the head of the first user turn, as Gemma 3's own template places it.

        The answer is asked for without a thinking block: a step, a short answer and their states are the
        answer's own text. Qwen3's and SmolLM3's templates take ``enable_thinking=False`` (others ignore it);
        one that opens a block regardless (DeepSeek-R1's distills end the prompt in ``<think>``) gets it closed
        empty, the block Qwen3's template writes (thinking on, every step and short answer would open with the tag)."""
        from jinja2.exceptions import TemplateError

        try:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                      enable_thinking=False)
            return text.rstrip() + "\n\n</think>\n\n" if text.rstrip().endswith("<think>") else text
        except TemplateError as e:
            if messages and messages[0].get("role") == "system" and len(messages) > 1:
                system, first, *rest = messages
                folded = [{**first, "content": f"{system['content']}\n\n{first['content']}"}, *rest]
                return self.format_chat(folded)
            raise ModelError(f"{self.name}: its chat template refused the prompt ({first_line(e)}); run with "
                             "prompt_style=plain") from None

    def info(self) -> dict:
        cfg = text_config(self.model)
        return {
            "model": self.name,
            "precision": self.precision,
            "dtype": self.dtype,
            "device": str(self.device),
            **self.speedups.info(),
            "shared_attention": self.shared_attention,
            "cuda_graphs": self.cuda_graphs,
            "draft_tokens": self.draft_tokens, "final_draft_tokens": self.final_draft_tokens,
            "exact_logits": self.exact_head is not None,
            "threads": self._torch.get_num_threads(),
            "layers": self.num_layers,
            "state_layer": self.state_layer,
            "state_source": self.state_source,
            "hidden_size": cfg.hidden_size,
            "kv_bytes_per_token": self._kv_bytes_per_token(),
            "vocab_size": cfg.vocab_size,
            "context_tokens": getattr(cfg, "max_position_embeddings", None),
            "eos_id": self.eos_id, "end_ids": list(self.end_ids),
            "capabilities": sorted(self.capabilities),
            "source": self.source,
        }

    #: Bytes per row and vocabulary entry while a step picks its tokens: the scores, and what top-k/top-p
    #: sampling sorts and keeps of them (float32 values, int64 indices).
    SCORE_BYTES = 12

    def _check_room(self, rows: int, new_tokens: int) -> None:
        """Refuse a call the device cannot hold before it starts (a huge k would grow the process until the system
        killed it, with no message). Counted: each row's new tokens' attention cache, twice (a growing cache is
        copied: old and new at once), and one step's scores over the vocabulary. Measured with the test model
        (bf16, k = 1,000, peak RSS above the loaded model): 5.05 MB a row at 100 new tokens (5.20 counted), 1.34 MB
        at 20 (1.51 counted)."""
        scores = text_config(self.model).vocab_size * self.SCORE_BYTES
        need = rows * (2 * new_tokens * self._kv_bytes_per_token() + scores)
        free = free_memory(self.device)
        if free is not None and need > free:  # (k = 10**5000 from Python: no float, no digits to print)
            asked = f"{need / 1e9:.1f} GB" if need < 10 ** 30 else "more memory than any machine has"
            raise MemoryError(f"cannot allocate {asked} for a call of "
                              f"{said(rows) if rows >= 10 ** 30 else f'{rows:,}'} "
                              f"rows ({said(new_tokens)} new tokens each): {free / 1e9:.1f} GB are free on "
                              f"{self.device}")

    def _kv_bytes_per_token(self) -> int:
        """Bytes of attention cache one token costs: keys and values, every layer, every KV head."""
        cfg = text_config(self.model)
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        elem = 4 if self.dtype in ("float32", "fp32") else 2
        return int(2 * self.num_layers * heads * head_dim * elem)

    # ---------------------------------------------------------------- API
    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """The text each token contributes (for aligning token probabilities to words)."""
        out, prev = [], ""
        for i in range(len(ids)):  # decode prefixes: robust to multi-byte and space-marker tokens
            cur = self.tokenizer.decode(list(ids[: i + 1]), skip_special_tokens=True)
            if cur.endswith("\ufffd") and i + 1 < len(ids):
                # The first bytes of a character split over tokens ("Ł" is two byte tokens in SmolLM2): it
                # contributes nothing yet, and the token that completes it carries the whole character. Read
                # piece by piece, the pair gave two U+FFFD, and "Łódź" became the words "ód" and nothing.
                out.append("")
                continue
            out.append(cur[len(prev):] if cur.startswith(prev) else self.tokenizer.decode([ids[i]]))
            prev = cur
        return out

    def _exclusive(self):
        """One call at a time on this model: its packed CPU projections hold a call's fused output until the sibling
        projections read it, the prefix cache is one dict, and ``attention`` switches the shared config's
        implementation, so two threads at once (``serve --workers 2``, a web app's request threads) would read each
        other's work. A CPU gains nothing from two calls at once; concurrent callers that want throughput batch
        (``BatchingModel``). Where decode steps are captured as CUDA graphs, one call at a time in the process: a
        capture fails if another thread synchronises the device."""
        return graphs.DEVICE_LOCK if self.cuda_graphs else self._lock

    def attention(self, text: str) -> tuple[list[int], "np.ndarray"]:
        """Token ids of ``text`` and the last layer's attention averaged over heads, (T, T) (DRAGIN)."""
        torch = self._torch
        ids = self.encode(check_text(text, "text"), special=False)
        with self._exclusive(), torch.inference_mode():  # the switch too: two switches at once left it eager
            cfg = text_config(self.model)
            impl = cfg._attn_implementation
            cfg._attn_implementation = "eager"  # the only implementation that returns weights
            try:
                out = self.model(input_ids=torch.tensor([ids], device=self.device), output_attentions=True,
                                 use_cache=False, logits_to_keep=1)  # its attention is read, not its logits
            finally:
                cfg._attn_implementation = impl
        return ids, out.attentions[-1][0].float().mean(0).cpu().numpy()

    def next_token_logprobs(self, prompts: Sequence[str], options: Sequence[str]) -> list[dict[str, float]]:
        prompts, options = check_texts(prompts), check_texts(options, "options")
        torch = self._torch
        res = []
        with self._exclusive(), torch.inference_mode():
            for p in prompts:
                lp = torch.log_softmax(self.prefill(p, None).logits, -1)
                res.append({o: float(lp[self.encode(o, special=False)[0]]) for o in options})
        return res

    def generate(self, prompts: Sequence[str], config: GenerationConfig, *,
                 prefix: str | None = None) -> list[Generation]:
        prompts = check_generate(prompts, config, prefix)
        if not prompts:
            return []
        torch = self._torch
        t0 = time.time()
        self.stats["calls"] += 1
        with self._exclusive(), torch.inference_mode():
            shared = self.prefill.extend(prefix,
                                         shared_prefix(prompts, prefix)) if prefix and len(prompts) > 1 else None
            prefilled = [self.prefill(p, prefix, shared) for p in prompts]
            self.stats["prefill_seconds"] += time.time() - t0
            # sliding-window caches cannot be left-padded side by side: decode those prompts one by one
            groups = [list(range(len(prompts)))] if not self._sliding else [[i] for i in range(len(prompts))]
            self._check_call(prefilled, max(map(len, groups)), config)  # before the random numbers: (k, T) of them
            streams = uniform_streams(config, len(prompts), self.device)
            results = [g for group in groups for g in self._decode([prefilled[i] for i in group], config,
                                                                   streams[group])]
        dt = time.time() - t0
        self.stats["seconds"] += dt
        for r in results:
            r.seconds = dt / max(1, len(results))
        return results

    def _backend(self):
        """The one-token step of this model's decode calls: a CUDA graph's, the shared-prefix one, or transformers'."""
        if self.cuda_graphs:
            return GraphedBackend(self.speedups.fast_step)
        if self.shared_attention:
            return SharedPrefixBackend(self.model, self._tap_modules(), self.speedups.fast_step)
        return CacheBackend(self.model, self._tap_modules(), self.pad_id)

    def _check_call(self, prefilled: list[Prefilled], batch: int, cfg: GenerationConfig) -> None:
        """A call the model's context or the device cannot hold, refused before any decoding (``batch``: the most
        prompts decoded side by side)."""
        longest, ctx = max(p.tokens for p in prefilled), self.prefill.context
        if ctx and longest + cfg.max_new_tokens > ctx:  # said before the k samples would run out of memory
            raise ValueError(f"max_new_tokens {said(cfg.max_new_tokens)} after a prompt of {longest} tokens runs past "
                             f"the model's {ctx}-token context; lower it (at most {ctx - longest} here)")
        self._check_room(batch * (int(cfg.greedy) + cfg.n), cfg.max_new_tokens)

    def _decode(self, prefilled: list[Prefilled], cfg: GenerationConfig, streams) -> list[Generation]:
        kinds = ([True] if cfg.greedy else []) + [False] * cfg.n
        detok = lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
        book = RowBook(len(prefilled), kinds, with_states=cfg.with_states, stops=cfg.stop,
                       stop_patterns=cfg.stop_patterns,
                       max_new=cfg.max_new_tokens, eos_id=self.eos_id, detok=detok, greedy_state=cfg.greedy_state,
                       greedy_trail=cfg.greedy_trail, end_ids=self.end_ids)
        k = self.final_draft_tokens if cfg.final else self.draft_tokens
        if drafts(cfg, prefilled, k):
            lookup_decode(CacheBackend(self.model, [], self.pad_id), prefilled[0], book, k, self.stats)
        else:
            decode(self._backend(), prefilled, book, cfg, streams, self.stats)
        self.stats["generated_tokens"] += book.generated_tokens
        return book.generations([p.tokens for p in prefilled], [p.cached for p in prefilled])
