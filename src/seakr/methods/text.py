"""Text helpers shared by the methods: answer extraction, token->word alignment, query building."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Sequence

import regex

from ..prompts import ANSWER_SAYS as _ANSWER
from ..search.base import LUCENE_ENGLISH_STOPWORDS

# Function words dropped from queries (stand-in for the reference's spaCy POS filter, which keeps
# NOUN/ADJ/VERB/PROPN/NUM/ADV; we avoid a spaCy model download by filtering a stop list instead).
QUERY_STOPWORDS = frozenset(LUCENE_ENGLISH_STOPWORDS) | {
    "so", "thus", "answer", "was", "were", "has", "had", "have", "he", "she", "his", "her", "its", "which",
    "who", "whom", "what", "when", "where", "why", "how", "did", "do", "does", "been", "being", "from",
    "also", "than", "both", "after", "before", "about", "i", "we", "you", "our", "my", "me", "him", "them",
    "s", "would", "could", "should", "can", "may", "one", "first", "born",
}
# A word: letters and digits of any script, with inner apostrophes and hyphens. ASCII-only, it cut "Björk" into
# "Bj" and "rk", which no passage holds: the engines index words of every script whole.
_WORD = re.compile(r"[^\W_](?:[^\W_]|['\-])*")
_IS_THE_ANSWER = re.compile(r"(?:^|[.!?]\s+)([^.!?]+?)\s+is the answer", re.IGNORECASE)


@functools.lru_cache(maxsize=64)
def answer_says(marker: str | None = None) -> re.Pattern:
    """Where a text gives its answer: "the answer is" (the default marker's words), or a method's own ``marker``
    ("The result is", "Final answer:"), which its prompts teach the model to say before the answer."""
    said = _ANSWER.search(marker) if marker else None
    if not marker or (said and not marker[said.end():].strip()):  # "So the answer is": the default's words
        return _ANSWER
    words = r"\s+".join(re.escape(w) for w in marker.split())
    edge = r"(?<!\w)" if marker.strip()[0].isalnum() else ""  # "Answer:" is not read inside "No answer:"
    # the marker first: where both match at one place ("the answer is surely X"), the answer follows the longer
    return re.compile(rf"{edge}{words}\s*:?\s*|{_ANSWER.pattern}", re.IGNORECASE)


def extract_answer(text: str, marker: str | None = None) -> str | None:
    """Text after "the answer is" (or the method's ``marker``) up to the end of that sentence; None when there
    is no answer.

    Unlike the reference, we do not cut at the first comma: "August 25, 1963" and "15,140" stay whole.
    A sentence ends at a period followed by whitespace, at a newline, or at the end of the text.
    """
    text = unthought(text)
    if not text:
        return None
    says = answer_says(marker)
    m = says.search(text)  # the first marker: what follows a second one is said again (or run on)
    if m is not None:
        rest = _before_the_marker_again(text[m.end():].split("\n", 1)[0], says)
        return tidy_answer(_first_sentence(rest)) or None
    m2 = _IS_THE_ANSWER.search(text)
    if m2:
        ans = re.sub(r"^(?:so|thus|therefore|hence|then)\b[,:]?\s*", "", m2.group(1).strip(), flags=re.IGNORECASE)
        return tidy_answer(ans) or None  # as the other reading: '"Paris" is the answer.' kept its quotes
    return None


#: The words that lead into a marker said again ("John So the answer is John So ..."), cut with it.
_LEAD_IN = re.compile(r"[\s,;]*\b(?:and\s+)?(?:so|thus|therefore|hence|then)?[\s,]*$", re.IGNORECASE)


def _before_the_marker_again(rest: str, says: re.Pattern = _ANSWER) -> str:
    """The text after a marker up to where the marker comes again: a model that writes no period after its answer
    (SmolLM2 without demonstrations) repeats "X So the answer is X So the answer is ..." until its budget ends."""
    again = says.search(rest)
    if again is None:
        return rest
    said = _LEAD_IN.sub("", rest[:again.start()])
    return said if said.strip() else rest[again.end():]  # "the answer is so the answer is X": X


#: A label a chat model may put before a short reply: "Answer: Paris", "**Final answer:** Paris",
#: "Short answer - Paris", the "A:" of a question-and-answer layout it continues, or a list's bullet ("- Paris";
#: not "1.": "1. FC Köln").
_LABEL = re.compile(r"^[*_#\s]*(?:(?:(?:final|short)\s+)?answer[*_]*(?:\s*:|\s+[-\u2013\u2014])|a\s*:)[*_]*\s*(?=\S)"
                    r"|^\s*[-*\u2022]\s+(?=\S)", re.IGNORECASE)


def short_answer(text: str) -> str:
    """A short-form reply read as its answer: "the answer is" when it says so, else the reply itself without a
    label before it ("Answer: Paris" is Paris)."""
    text = unthought(text)
    return extract_answer(text) or tidy_answer(_LABEL.sub("", text.strip()).rstrip("\u3002\uff0e"))


#: A reasoning model's thinking block, closed ("<think>... so the answer is Lyon. Wait ...</think> So the answer
#: is Paris." was read as Lyon, its first guess). An unclosed block is all the reply there is: it stays.
_THOUGHT = re.compile(r"<think>.*?</think>", re.S)


def unthought(text: str) -> str:
    """``text`` without the thinking blocks a reasoning model closed before its answer."""
    return _THOUGHT.sub("", text) if text and "</think>" in text else text


#: What a chat model wraps a whole answer in: quotes of several scripts, markdown's emphasis and code, brackets.
_WRAPS = (("\u201c", "\u201d"), ("\u2018", "\u2019"), ("\u00ab", "\u00bb"), ("\u300c", "\u300d"), ("\u300e", "\u300f"),
          ('"', '"'), ("**", "**"), ("__", "__"), ("*", "*"), ("_", "_"), ("`", "`"), ("(", ")"), ("[", "]"),
          ("\u201e", "\u201c"), ("\u201a", "\u2018"), ("\u2039", "\u203a"),  # German's low-high quotes, French's single
          ("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"),  # LaTeX's inline and display maths
          ("<answer>", "</answer>"))  # the tags a model trained to answer inside them writes (Search-R1, R1-style)
#: Marks an answer may open or close without the other half: brackets and quotes.
_PAIRS = (("(", ")"), ("[", "]"), ("\u201c", "\u201d"), ("\u00ab", "\u00bb"), ('"', '"'))


def tidy_answer(ans: str) -> str:
    """An answer as it is scored and shown: without a closing period, marks around the whole of it
    ("**Paris**", "\u201cParis\u201d", "(Paris)", LaTeX's "$\\boxed{Paris}$"), or a bracket or quote it opens or
    closes alone ('Cotula")', "(So the answer is Paris)."). A mark inside stays: '"The Shining" (1980)' and
    '"Paris" and "Lyon"' keep theirs (a quote stripped from one end only left 'The Shining" (1980)')."""
    while True:
        before = ans
        ans = _yes_no(_latex(_unwrap(_unmatched(ans.strip().rstrip(".").strip()))))
        if ans == before:
            return ans


#: "Yes, both are American": a yes or no with its reason after a comma, the reason in lower case (not the
#: title "Yes, Minister"). HotpotQA's F1 gives a "yes"/"no" gold nothing unless the prediction is that word alone.
_YES_NO = re.compile(r"((?i:yes|no))(?:\s*[,;:\u2014]|\s+[\u2013-])\s*(?=[a-z])")


def _yes_no(ans: str) -> str:
    m = _YES_NO.match(ans)
    return m.group(1).lower() if m else ans


#: A LaTeX command around the whole answer, as models tuned on mathematics write it ("\boxed{Paris}",
#: "$\text{Paris}$"): SQuAD's normalisation dropped the backslash and braces and kept the word, "boxedparis".
_LATEX = re.compile(r"\\(?:boxed|fbox|text|textbf|textit|textrm|mathrm|mathbf|mbox)\s*\{(.*)\}", re.S)


def _latex(ans: str) -> str:
    m = _LATEX.fullmatch(ans)
    if m is None:
        return ans
    depth = 0
    for ch in m.group(1):  # "\text{a} and \text{b}": the braces must enclose the whole answer
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            return ans
    return m.group(1) if depth == 0 else ans


def _unwrap(ans: str) -> str:
    """Without one pair of marks around the whole answer. The typographic quotes cost the exact match (SQuAD's
    normalisation drops ASCII punctuation only)."""
    for o, c in _WRAPS:
        inner = ans[len(o):len(ans) - len(c)]
        if len(ans) > len(o) + len(c) and ans.startswith(o) and ans.endswith(c) and c not in inner and o not in inner:
            return inner
    return ans


def _unmatched(ans: str) -> str:
    """Without a mark at either end that has no partner in the answer."""
    for o, c in _PAIRS:
        if o == c:  # a quote that both opens and closes: an odd count leaves one alone, the opening one first
            lone = ans.count(o) % 2
            opens, closes = lone and ans.startswith(o), lone and ans.endswith(c)
        else:
            opens = ans.startswith(o) and ans.count(o) > ans.count(c)
            closes = ans.endswith(c) and ans.count(c) > ans.count(o)
        if opens:
            return ans[len(o):]
        if closes:
            return ans[: -len(c)]
    return ans


_ABBREV = {"st", "dr", "mr", "mrs", "ms", "jr", "sr", "mt", "ft", "vs", "no", "co", "inc", "ltd", "prof", "gen",
           "col", "lt", "sgt", "rev", "u.s", "d.c", "u.k", "e.g", "i.e", "etc", "ca", "op", "vol", "feat"}


#: A period before a space, the end, a capital of any cased script or markup ("Reykjavík.Östersund ...").
_SENTENCE_END = regex.compile(r"\.(?=\s|$|[\p{Lu}*#\[])")


def _first_sentence(s: str) -> str:
    """Up to the first period that ends a sentence (not an abbreviation or an initial), also one with
    no space before the next sentence ("American.What is ..."), or at a full stop of CJK text ("\u3002")."""
    s = re.split(r"[\u3002\uff0e]", s, maxsplit=1)[0]
    for m in _SENTENCE_END.finditer(s):
        word = re.findall(r"[\w.]+$", s[: m.start()])
        w = word[0].lower() if word else ""
        if w in _ABBREV or (len(w) == 1 and w.isalpha()) or "." in w.rstrip("."):
            if m.end() < len(s.rstrip()):
                continue
        return s[: m.start()]
    return s


def has_answer(text: str, marker: str | None = None) -> bool:
    return extract_answer(text, marker) is not None


def is_unknown(ans: str | None) -> bool:
    """No answer: empty, saying "unknown" (the reference's test) or abstaining in other words ("I don't know",
    "not enough information", "cannot be determined", "N/A"), other than in a name. "Unknown Pleasures", "The
    Unknown Soldier" and the song "I Don't Know" are answers, so the test is not a substring test. An abstention
    never wins a final choice, and a knowledge check sure of one retrieves rather than answering with it."""
    if ans is None or not ans.strip():
        return True
    return (any(not _in_name(ans, m) for m in _UNKNOWN.finditer(ans))
            or any(not _titled(m.group()) for m in _ABSTAIN.finditer(ans)))


_UNKNOWN = re.compile(r"unknown", re.IGNORECASE)
#: Abstentions beside "unknown", as small chat models word them.
_ABSTAIN = re.compile(
    r"\b(?:i|we)\s+(?:do\s*n[o']?t|cannot|can'?t|can\s+not)\s+(?:know|say|tell|determine|answer|find|be\s+sure)\b"
    r"|\b(?:i\s+am|i'm)\s+(?:not\s+sure|unsure|not\s+certain)\b"
    r"|\b(?:not\s+enough|insufficient|no)\s+(?:information|context|data)\b"
    r"|\b(?:cannot|can'?t|can\s+not)\s+be\s+(?:determined|answered|known)\b"
    r"|\bnot\s+possible\s+to\s+(?:determine|answer|say|know|tell)\b"
    r"|^\W*n/?a\W*$", re.IGNORECASE)


def _titled(phrase: str) -> bool:
    """Words each capitalised, as a title's are ("I Don't Know", a song); "N/A" and "I don't know" are not."""
    words = phrase.split()
    return len(words) > 1 and all(w[:1].isupper() for w in words)


def _in_name(text: str, m: re.Match) -> bool:
    """The word is capitalised as a name's is, beside another capitalised word ("Unknown Pleasures", "The
    Unknown"); "Unknown person", "unknown", "UNKNOWN", "It is Unknown" say there is no answer."""
    if m.group() != "Unknown":
        return False
    before, after = text[: m.start()].split(), text[m.end():].split()
    return any(w[:1].isupper() for w in (before[-1:] + after[:1]))


def drop_answer_sentence(step: str, marker: str | None = None) -> str:
    """The step without its "the answer is ..." (or ``marker`` ...) sentence (rationale-based final reasoning)."""
    m = answer_says(marker).search(step)
    if not m:
        return step
    head = step[: m.start()]
    head = re.sub(r"\bso\s*$", "", head.rstrip(), flags=re.IGNORECASE)
    return head.strip().rstrip(",;").strip()


@dataclass
class Word:
    text: str
    start: int
    tokens: list[int]  # indices into the token list
    min_p: float


def align_words(pieces: Sequence[str], logprobs: Sequence[float]) -> list[Word]:
    """Group tokens into words by character offsets; a word's confidence is its least likely token."""
    text, starts = "", []
    for p in pieces:
        starts.append(len(text))
        text += p
    ends = [s + len(p) for s, p in zip(starts, pieces)]
    for i in reversed(range(len(pieces) - 1)):  # a token adding no character yet (the first bytes of one)
        if not pieces[i]:                        # counts with the token that completes it
            starts[i], ends[i] = starts[i + 1], ends[i + 1]
    words = []
    for m in _WORD.finditer(text):
        toks = [i for i in range(len(pieces)) if starts[i] < m.end() and ends[i] > m.start()]
        if not toks:
            continue
        ps = [math.exp(logprobs[i]) for i in toks if i < len(logprobs)]
        words.append(Word(m.group(0), m.start(), toks, min(ps) if ps else 0.0))
    return words


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in QUERY_STOPWORDS]


def question_words(question: str) -> list[str]:
    """The question's content words, or the question itself when it has none ("Who?"): the query a
    step falls back to is then the one the search really runs, and the trace shows it."""
    return content_words(question) or question.split()


def build_query(words: Sequence[Word], question: str, previous: str = "", keep_p: float = 0.9,
                max_words: int = 64) -> tuple[str, list[str]]:
    """SeaKR's query (paper §3.1, FLARE-style): the pseudo-generated step minus its low-confidence
    words. A word stays when it appears in the question or the previous step, or all its tokens have
    p >= keep_p; stop words go. Empty -> the question's words. Returns (query, dropped words)."""
    ql, pl = question.lower(), previous.lower()
    kept, dropped = [], []
    for w in words:
        lw = w.text.lower()
        if lw in QUERY_STOPWORDS:
            continue
        if lw in ql or (pl and lw in pl) or w.min_p >= keep_p:
            kept.append(w.text)
        else:
            dropped.append(w.text)
    if not kept:
        kept = question_words(question)
    return " ".join(kept[-max_words:]), dropped


def mask_low_prob(words: Sequence[Word], theta: float, question: str, max_words: int = 64) -> str:
    """FLARE's masked query: the tentative sentence without its tokens below probability theta."""
    kept = [w.text for w in words if w.min_p >= theta and w.text.lower() not in QUERY_STOPWORDS]
    if not kept:
        kept = question_words(question)
    return " ".join(kept[-max_words:])
