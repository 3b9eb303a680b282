"""One document's graph record for MIR (Sec. 3.1; the format is in :mod:`longrank.mir_graphs.graphs`'s docstring): its
passages with an [SNT] before each sentence piece, its sentence and token pivots, and its p2p / s2s / t2t edges;
and the words and tf-idf the PRF pivots and p2p similarities are counted in."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from itertools import combinations

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

from longrank.data.mir_graph_settings import GraphSetSettings
from longrank.errors import InputError

# ASCII letters and digits, lower-cased after matching: "lowercase [a-z0-9] runs" whose offsets stay those of
# the text (lower-casing first can change a string's length: "İ".lower() has two characters)
_WORD = re.compile(r"[A-Za-z0-9]{2,}")


def word_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, word)`` of each word of ``text``: a lower-cased run of letters and digits, neither of one
    character nor one of scikit-learn's English stop words."""
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if word not in ENGLISH_STOP_WORDS:
            yield match.start(), match.end(), word


def words(text: str) -> list[str]:
    return [word for _, _, word in word_spans(text)]


def fit_tfidf(texts: Iterable[str]) -> TfidfVectorizer | None:
    """scikit-learn's TfidfVectorizer over ``words`` as fitted on ``texts`` (smoothed idf, L2-normalised rows),
    from document frequencies counted while streaming: ``fit`` would hold the whole collection's term matrix.
    None where the texts have no word at all."""
    df: Counter[str] = Counter()
    n = 0
    for text in texts:
        df.update(set(words(text)))
        n += 1
    if not df:
        return None
    vocabulary = sorted(df)
    vectorizer = TfidfVectorizer(analyzer=words, vocabulary={w: i for i, w in enumerate(vocabulary)})
    vectorizer.idf_ = np.log((1 + n) / (1 + np.array([df[w] for w in vocabulary], dtype=np.float64))) + 1
    return vectorizer


def passage_windows(n_tokens: int, window: int, stride: int, max_tokens: int) -> list[tuple[int, int]]:
    """``(start, end)`` token ranges of the passages over a document's first ``max_tokens`` of ``n_tokens``
    tokens: every ``stride`` tokens, ``window`` long, one more ending at the last token where the stride skips a
    tail; at least one (empty for an empty document)."""
    n = min(n_tokens, max_tokens)
    windows = [(s, min(s + window, n)) for s in range(0, max(n - window, 0) + 1, stride)]
    if windows[-1][1] < n:
        windows.append((n - window, n))
    return windows


def p2p_edges(passage_texts: list[str], vectorizer: TfidfVectorizer | None, top_k: int) -> list[list[int]]:
    """Pairs [i, j] (i < j) where j is among i's ``top_k`` most tf-idf-cosine-similar other passages or i among
    j's (ties by index). Passages sharing no word (cosine 0) are never linked: such a link would carry no
    similarity, only the order of the passages."""
    if vectorizer is None or top_k == 0 or len(passage_texts) < 2:
        return []
    x = vectorizer.transform(passage_texts)
    sim = (x @ x.T).toarray()  # rows are L2-normalised: dot products are cosines
    pairs: set[tuple[int, int]] = set()
    for i in range(len(passage_texts)):
        others = sorted(
            (j for j in range(len(passage_texts)) if j != i and sim[i, j] > 0), key=lambda j: (-sim[i, j], j)
        )
        pairs.update((min(i, j), max(i, j)) for j in others[:top_k])
    return [list(p) for p in sorted(pairs)]


def _linked(groups: Iterable[list[int]]) -> list[list[int]]:
    """Every pair within each group of node indices, sorted, each once."""
    pairs = {p for group in groups for p in combinations(sorted(set(group)), 2)}
    return [list(p) for p in sorted(pairs)]


def _check_annotation(text: str, annotation: dict) -> None:
    bad = [s for s in annotation["sentences"] if not 0 <= s[0] <= s[1] <= len(text)]
    bad += [e for e in annotation["entities"] if not 0 <= e[0] <= e[1] <= len(text) or text[e[0] : e[1]] != e[3]]
    if bad:
        raise InputError(
            f"its annotation does not match its text (span {bad[0]} in a text of {len(text)} characters): "
            "annotated from another collection or with another max_words? re-run the annotate stage"
        )


def build_record(
    text: str,
    annotation: dict,
    prf_words: list[str],
    tokenizer,
    settings: GraphSetSettings,
    vectorizer: TfidfVectorizer | None,
) -> dict:
    """The graph record of one document. ``text``: the text its ``annotation`` was made from
    (``annotate.cut_text``); ``prf_words``: its PRF words (none without a PRF set: entities only);
    ``settings``: checked by ``graph_settings``; ``vectorizer``: ``fit_tfidf`` on the collection."""
    _check_annotation(text, annotation)
    ids, starts, ends = _wordpieces(text, tokenizer, settings.max_doc_tokens)
    n = len(ids)
    read = text[: ends[-1]] if n else ""
    mentions = _mentions(read, annotation, prf_words, settings.entity_labels, starts, ends)
    passages, sentences, piece_keys, tokens, texts = _cut_passages(
        text, ids, starts, ends, annotation, mentions, tokenizer.sep_token_id, settings
    )
    sentences = sentences[: settings.max_sentence_nodes]
    tokens = tokens[: settings.max_token_nodes]
    by_key: dict[str, list[int]] = defaultdict(list)
    for i, (_, _, key) in enumerate(tokens):
        by_key[key].append(i)
    sharing: dict[str, list[int]] = defaultdict(list)
    for i, keys in enumerate(piece_keys[: len(sentences)]):
        for key in keys:
            sharing[key].append(i)
    return {
        "passages": passages,
        "sentences": sentences,
        "tokens": [[p, pos] for p, pos, _ in tokens],
        "token_keys": [key for _, _, key in tokens],
        "edges": {
            "p2p": p2p_edges(texts, vectorizer, settings.p2p_top_k),
            "s2s": _linked(sharing.values()),
            "t2t": _linked(by_key.values()),
        },
        "n_tokens": n,
    }


def _wordpieces(text: str, tokenizer, max_tokens: int) -> tuple[list[int], list[int], list[int]]:
    """The ids of ``text``'s first ``max_tokens`` WordPieces and each one's start and end character."""
    # split_special_tokens: a document's literal "[SEP]" stays text, so only our markers hold sep_token_id
    enc = tokenizer(
        text,
        add_special_tokens=False,
        return_offsets_mapping=True,
        truncation=True,
        max_length=max_tokens,
        split_special_tokens=True,
    )
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    return ids, [a for a, _ in offsets], [b for _, b in offsets]


def _mentions(
    read: str,
    annotation: dict,
    prf_words: list[str],
    entity_labels: Iterable[str],
    starts: list[int],
    ends: list[int],
) -> list[tuple[str, int, int]]:
    """``(key, first token, end token)`` of each mention in the ``read`` text, entities first (a token goes to the
    first T node that claims it), then PRF words; mentions that cover no token are left out."""
    labels = set(entity_labels)
    spans = [(a, b, "e:" + " ".join(t.lower().split())) for a, b, label, t in annotation["entities"] if label in labels]
    wanted = set(prf_words)
    spans += [(a, b, "w:" + w) for a, b, w in word_spans(read) if w in wanted]
    mentions = [
        (key, bisect_right(ends, a), bisect_left(starts, b)) for a, b, key in spans
    ]  # tokens overlapping [a, b)
    return [(key, lo, hi) for key, lo, hi in mentions if lo < hi]


def _cut_passages(
    text: str,
    ids: list[int],
    starts: list[int],
    ends: list[int],
    annotation: dict,
    mentions: list[tuple[str, int, int]],
    sep: int,
    settings: GraphSetSettings,
) -> tuple[list[list[int]], list[list[int]], list[set[str]], list[tuple[int, list[int], str]], list[str]]:
    """The passages' ids with an [SNT] before each sentence piece, the S nodes, each piece's mention keys, the T
    nodes (passage, positions, key) in document order, and each passage's text (for p2p)."""
    n = len(ids)
    sentence_starts = [start for start, _ in annotation["sentences"]]
    sentence_of = [max(bisect_right(sentence_starts, a) - 1, 0) for a in starts]
    keys_at: list[list[str]] = [[] for _ in range(n)]
    for key, lo, hi in mentions:
        for t in range(lo, hi):
            keys_at[t].append(key)
    passages: list[list[int]] = []
    sentences: list[list[int]] = []
    piece_keys: list[set[str]] = []
    tokens: list[tuple[int, list[int], str]] = []
    texts: list[str] = []
    for p, (start, end) in enumerate(passage_windows(n, settings.window, settings.stride, settings.max_doc_tokens)):
        seq: list[int] = []
        position: dict[int, int] = {}
        for t in range(start, end):
            if t == start or sentence_of[t] != sentence_of[t - 1]:  # a sentence piece begins
                sentences.append([p, len(seq)])
                piece_keys.append(set())
                seq.append(sep)
            piece_keys[-1].update(keys_at[t])
            position[t] = len(seq)
            seq.append(ids[t])
        if not seq:  # an empty document: one passage holding a lone [SNT]
            sentences.append([p, 0])
            piece_keys.append(set())
            seq.append(sep)
        passages.append(seq)
        texts.append(text[starts[start] : ends[end - 1]] if end > start else "")
        claimed: set[int] = set()
        for key, lo, hi in mentions:
            inside = range(max(lo, start), min(hi, end))
            if inside and not claimed.intersection(inside):
                claimed.update(inside)
                tokens.append((p, [position[t] for t in inside], key))
    tokens.sort(key=lambda node: (node[0], node[1][0]))  # document order (entities were taken first)
    return passages, sentences, piece_keys, tokens, texts
