import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from helpers import shared_path  # noqa: F401  (re-exported for older imports)

#: Names a test's code uses to start seakr in a fresh process.
_PROCESS_NAMES = {"run_cli", "subprocess"}


def _names(code) -> set:
    names = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):  # a function or lambda inside the test
            names |= _names(c)
    return names


def _starters(module) -> frozenset:
    """The names that start seakr in a fresh process in a test module: run_cli and subprocess, and the module's
    own functions (or those it imports) whose code names one of them."""
    out = set(_PROCESS_NAMES)
    for name, f in vars(module).items():
        code = getattr(f, "__code__", None)
        if code is not None and _PROCESS_NAMES & _names(code):
            out.add(name)
    return frozenset(out)


def pytest_collection_modifyitems(items):
    """Mark ``process`` each test whose own code starts seakr in a fresh process (:func:`_starters`): each start
    costs the interpreter and seakr's imports, so ``make check`` leaves them to ``make test``."""
    starters = {}
    for item in items:
        code = getattr(getattr(item, "function", None), "__code__", None)
        module = getattr(item, "module", None)
        if code is None or module is None:
            continue
        if module not in starters:
            starters[module] = _starters(module)
        if starters[module] & _names(code):
            item.add_marker(pytest.mark.process)


@pytest.fixture(scope="session")
def tiny_lm():
    """A tiny randomly initialised Llama + a BPE tokenizer trained in the test (no files, no hub)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from seakr.models.hf import HFLanguageModel

    text = [
        "Question: Who wrote Hamlet? Answer: William Shakespeare wrote Hamlet. So the answer is Shakespeare.",
        "Paris is the capital of France. The Seine flows through Paris. Berlin is in Germany.",
        "The quick brown fox jumps over the lazy dog. Numbers 1 2 3 4 5 6 7 8 9 10.",
    ] * 20
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(text, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = LlamaForCausalLM(cfg)
    return HFLanguageModel(_modules=(model, tok), dtype="float32", threads=1)


@pytest.fixture(scope="session")
def smol():
    """The real packaged test model (converted once into the user cache)."""
    from seakr.models import load_model

    return load_model("smollm2-135m", dtype="float32")


@pytest.fixture(scope="session")
def small_index(tmp_path_factory):
    """A real seakr index over the fixture's passages (tests/fixtures/hotpotqa_mini), shared by the session."""
    from helpers import HOTPOT
    from seakr.search.corpora import read_corpus
    from seakr.search.tantivy_engine import TantivyEngine

    out = tmp_path_factory.mktemp("srv") / "idx"
    TantivyEngine.build(read_corpus(HOTPOT), out)
    return str(out)
