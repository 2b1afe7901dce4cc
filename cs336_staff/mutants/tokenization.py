"""Mutants of the tokenization part: each a mistake students make with BPE, caught by the public tests."""

from __future__ import annotations

from cs336_staff.mutants import Control, HiddenOnly, Mutant

PKG = "cs336_assignment/tokenization"
TRAIN_TESTS = ("tests/test_bpe_train.py",)
TOKENIZER_TESTS = ("tests/test_tokenizer.py",)
#: The reference's ``decode`` lookup, which the unknown-id mutants replace.
DECODE_LOOKUP = """try:
    data = b"".join(self.vocab[i] for i in ids)
except KeyError as e:
    raise ValueError(f"id {e.args[0]} is not in the vocabulary (ids run 0..{max(self.vocab)})") from None"""
#: The reference's ``encode_iterable`` body, which the stream mutants replace whole.
STREAM_BODY = """        pieces: list[str] = []
        size = 0
        threshold = STREAM_BLOCK
        for piece in iterable:
            pieces.append(piece)
            size += len(piece)
            if size >= threshold:
                ids, rest = self._encode_settled("".join(pieces))
                yield from ids
                pieces, size = [rest], len(rest)
                threshold = size + STREAM_BLOCK  # a long unsettled tail must not make this quadratic
        yield from self.encode("".join(pieces))
"""

MUTANTS = [
    Mutant(
        name="bpe-ties-to-smaller-pair",
        file=f"{PKG}/train.py",
        function="tie_break_key",
        old='return token.translate(_INVERT).decode("latin-1") + "\\u0100"',
        new='return token.decode("latin-1") + "\\x00"',
        why="breaks ties toward the lexicographically smaller pair (forgot heapq is a min-heap)",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-merges-across-special-tokens",
        file=f"{PKG}/pretokenize.py",
        function="count_pretokens",
        old="segments = [text] if pattern is None else pattern.split(text)",
        new="segments = [text]",
        why="pre-tokenizes the text without first splitting it on special tokens, so '<|' and 'endoftext' get merged",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-ignores-pretoken-counts",
        file=f"{PKG}/train.py",
        function="learn_merges",
        old="            freqs.append(count)\n",
        new="            freqs.append(1)\n",
        why="counts each distinct pre-token once instead of weighting its pairs by how often it occurs",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-drops-stale-heap-entries",
        file=f"{PKG}/train.py",
        function="learn_merges",
        old="                heapq.heappush(heap, (-count, key, x, y))\n",
        new="                pass\n",
        why="throws away a heap entry whose count went down instead of re-queueing it at its true count",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="decode-strict-utf8",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.decode",
        old='return data.decode("utf-8", errors="replace")',
        new='return data.decode("utf-8")',
        why="decodes with errors='strict', so a model's output that splits a character crashes decode",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="special-tokens-not-longest-first",
        file=f"{PKG}/pretokenize.py",
        function="special_tokens_regex",
        old="ordered = sorted(special_tokens, key=len, reverse=True)",
        new="ordered = list(special_tokens)",
        why="builds the special-token alternation in the given order, so a shorter token shadows a longer overlapping one",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-merges-leftmost-first",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer._encode_pretoken",
        old="i = min(range(len(ids) - 1), key=lambda j: ranks.get((ids[j], ids[j + 1]), no_merge))",
        new="i = next((j for j in range(len(ids) - 1) if (ids[j], ids[j + 1]) in ranks), 0)",
        why="applies the leftmost mergeable pair first instead of the lowest-rank (earliest learned) merge",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-merges-rightmost-occurrence-first",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer._encode_pretoken",
        old="i = min(range(len(ids) - 1), key=lambda j: ranks.get((ids[j], ids[j + 1]), no_merge))",
        new="i = min(reversed(range(len(ids) - 1)), key=lambda j: ranks.get((ids[j], ids[j + 1]), no_merge))",
        why="breaks a tie between occurrences of the best pair toward the right (a hand-written search with "
        "`rank <= best` instead of `<`): '   ' with the merge (' ', ' ') becomes ' ' + '  ' instead of '  ' + ' '",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-iterable-emits-unsettled-pretokens",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer._encode_settled",
        old="settled = GPT2_REGEX.findall(text, start, end)[:-2]",
        new="settled = GPT2_REGEX.findall(text, start, end)",
        why="encodes each buffered piece completely, although the next piece can still change its last pre-tokens",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="compression-ratio-inverted",
        file=f"{PKG}/simple.py",
        function="compression_ratio",
        old='return len(text.encode("utf-8")) / len(ids)',
        new='return len(ids) / len(text.encode("utf-8"))',
        why="reports tokens per byte instead of bytes per token",
        tests=("tests/test_tokenization.py",),
    ),
    Mutant(
        name="byte-decode-strict-utf8",
        file=f"{PKG}/simple.py",
        function="ByteTokenizer.decode",
        old='return bytes(ids).decode("utf-8", errors="replace")',
        new='return bytes(ids).decode("utf-8")',
        why="the byte tokenizer's decode crashes on byte sequences that are not UTF-8",
        tests=("tests/test_tokenization.py",),
    ),
    Mutant(
        name="bpe-reads-the-corpus-in-text-mode",
        file=f"{PKG}/train.py",
        function="count_file_pretokens",
        old="""
            for job in jobs:
                counts.update(_count_chunk(job))
                bar.update(job[2] - job[1])""",
        new="""
            text = read_utf8(input_path).replace("\\r\\n", "\\n").replace("\\r", "\\n")
            counts.update(count_pretokens(text, special_tokens))""",
        why="reads the corpus as open(path, encoding='utf-8') does (here with read_utf8's errors): universal "
        "newlines turn every \\r\\n and lone \\r into \\n, so the merges of a Windows-edited file never hold a \\r",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-parallel-chunks-cut-at-fixed-offsets",
        file=f"{PKG}/train.py",
        function="count_file_pretokens",
        old="    bounds = find_chunk_boundaries(input_path, special_tokens, target)\n",
        new="    bounds = [*range(0, size, target), size]\n",
        why="splits the file for the workers every `target` bytes, wherever that falls: inside a word (one "
        "pre-token counted as two) or inside a multi-byte character",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-parallel-chunks-cut-anywhere-without-special-tokens",
        file=f"{PKG}/train.py",
        function="count_file_pretokens",
        old="    bounds = find_chunk_boundaries(input_path, special_tokens, target)\n",
        new="""    bounds = find_chunk_boundaries(input_path, special_tokens, target)
    if not special_tokens:
        with open(input_path, "rb") as f:
            data = f.read()
        bounds = [0]
        while bounds[-1] < size:
            cut = min(bounds[-1] + target, size)
            while cut < size and 0x80 <= data[cut] < 0xC0:  # not inside a UTF-8 character
                cut += 1
            bounds.append(cut)
""",
        why="with no special token to cut before, cuts the file every `target` bytes (moved to the next "
        "character, so it still decodes): the cuts fall inside words, which are then counted as two pre-tokens",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-parallel-chunks-cut-after-any-newline",
        file=f"{PKG}/train.py",
        function="count_file_pretokens",
        old="    bounds = find_chunk_boundaries(input_path, special_tokens, target)\n",
        new="""    with open(input_path, "rb") as f:
        data = f.read()
    bounds = [0]
    while bounds[-1] < size:
        cut = data.find(b"\\n", bounds[-1] + target)
        bounds.append(size if cut == -1 else cut + 1)
""",
        why="cuts the file for the workers just after a newline, as if no pre-token crossed one: GPT-2's "
        "whitespace runs (\\n\\n, \\n   ) do, so a blank line at a cut is counted as two pre-tokens",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-contractions-ignore-case",
        file=f"{PKG}/pretokenize.py",
        function="count_pretokens",
        old="        counts.update(GPT2_REGEX.findall(segment))  # Counter.update on a list runs in C\n",
        new="        counts.update(regex.findall(GPT2_PATTERN, segment, flags=regex.IGNORECASE))\n",
        why="compiles GPT-2's pattern with IGNORECASE (GPT-4's cl100k pattern is case-insensitive), so the "
        "trainer splits \"DON'T\" as DON + 'T where GPT-2 has DON + ' + T",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="encode-contractions-ignore-case",
        file=f"{PKG}/pretokenize.py",
        function="_bmp_regex",
        old="""re.compile(rf\"\"\"'(?:[sdmt]|ll|ve|re)| ?[{_L}]+| ?[{_N}]+| ?[^{_S}{_L}{_N}]+|[{_S}]+(?![^{_S}])|[{_S}]+\"\"\")""",
        new="""re.compile(rf\"\"\"(?i:'[sdmt]|'ll|'ve|'re)| ?[{_L}]+| ?[{_N}]+| ?[^{_S}{_L}{_N}]+|[{_S}]+(?![^{_S}])|[{_S}]+\"\"\")""",
        why="writes the contraction rule case-insensitively, (?i:'s|'t|...) as GPT-4's pattern does: \"DON'T\" "
        "encodes as DON + 'T where GPT-2 (and tiktoken with its pattern) has DON + ' + T",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-iterable-holds-back-only-the-shortest-special-token",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="self._longest_special = max((len(t) for t in self.special_tokens), default=0)",
        new="self._longest_special = min((len(t) for t in self.special_tokens), default=0)",
        why="holds back only as many characters as the shortest special token: when a piece ends between "
        "<|endoftext|> and <|endoftext|>, a special <|endoftext|><|endoftext|> is emitted as two tokens",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="tokenizer-new-special-token-id-is-len-vocab",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="self._special_ids[token] = max(self.vocab, default=-1) + 1",
        new="self._special_ids[token] = len(self.vocab)",
        why="gives a new special token the id len(vocab), which is already taken when the vocabulary's ids "
        "have gaps (a vocab from another trainer, or one with tokens removed)",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="tokenizer-mutates-the-callers-vocab",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="        self.vocab = dict(vocab)\n",
        new="        self.vocab = vocab\n",
        why="keeps the caller's vocab dict and adds the new special tokens to it: the caller's vocabulary grows "
        "behind its back, and a second tokenizer built from it sees the first one's special tokens",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="bpe-special-token-ids-longest-first",
        file=f"{PKG}/train.py",
        function="train_bpe",
        old="special_tokens = check_special_tokens(special_tokens)",
        new="special_tokens = sorted(check_special_tokens(special_tokens), key=len, reverse=True)",
        why="sorts the special tokens longest first (as matching needs) and numbers them in that order, "
        "instead of in the order given",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="encode-iterable-keeps-its-buffer-on-the-tokenizer",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.encode_iterable",
        old=STREAM_BODY,
        new="""        self._buffer = getattr(self, "_buffer", "")  # the unsettled text, kept on the tokenizer
        for piece in iterable:
            self._buffer += piece
            if len(self._buffer) >= STREAM_BLOCK:
                ids, self._buffer = self._encode_settled(self._buffer)
                yield from ids
        ids, self._buffer = self.encode(self._buffer), ""
        yield from ids
""",
        why="keeps the stream's unsettled text in self._buffer: two streams advanced in turns mix their texts, "
        "and a stream dropped midway leaves its tail to be prepended to the next one",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="bpe-caches-pretoken-counts-by-path",
        file=f"{PKG}/train.py",
        function="count_file_pretokens",
        old="    # BEGIN SOLUTION\n    size = os.path.getsize(input_path)\n",
        new="""    # BEGIN SOLUTION
    cache = globals().setdefault("_COUNTS_BY_PATH", {})  # pre-tokenizing is slow: do it once per file
    key = (os.fspath(input_path), tuple(special_tokens))
    if key not in cache:
        cache[key] = None
        cache[key] = count_file_pretokens(input_path, special_tokens, num_processes, progress)
    if cache[key] is not None:
        return Counter(cache[key])
    size = os.path.getsize(input_path)
""",
        why="memoizes the pre-token counts by file name to make repeated training fast: training again on "
        "a file rewritten at the same path returns the old file's merges",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="encode-iterable-stops-at-an-empty-piece",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.encode_iterable",
        old="pieces.append(piece)",
        new="""
            if not piece:
                break  # end of input
            pieces.append(piece)""",
        why="treats an empty piece as the end of the input (as file.readline() signals EOF): a stream with an "
        "empty chunk in the middle loses everything after it",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-iterable-holds-back-one-pretoken",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer._encode_settled",
        old="settled = GPT2_REGEX.findall(text, start, end)[:-2]",
        new="settled = GPT2_REGEX.findall(text, start, end)[:-1]",
        why="holds back only the last pre-token of the buffer: a match can look past its own end (a space "
        "before a word, a whitespace run's lookahead), so the one before it can still change too",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-iterable-encodes-each-piece-on-its-own",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.encode_iterable",
        old=STREAM_BODY,
        new="""        for piece in iterable:
            yield from self.encode(piece)  # a file's lines are independent, aren't they?
""",
        why="encodes each piece (a file's line) on its own: a contraction, number, word or special token cut "
        "between two pieces is settled as two pre-tokens",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-iterable-holds-back-a-fixed-number-of-characters",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.encode_iterable",
        old="""                ids, rest = self._encode_settled("".join(pieces))""",
        new="""                text = "".join(pieces)  # hold back a few characters, in case a token continues
                ids, rest = self.encode(text[:-16]), text[-16:]""",
        why="holds back a fixed number of characters instead of whole pre-tokens: the settled text ends in "
        "the middle of a pre-token, which the held-back characters would have extended",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-iterable-reads-everything-first",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.encode_iterable",
        old=STREAM_BODY,
        new="""        yield from self.encode("".join(iterable))  # exact, and still a generator
""",
        why="joins the whole input, then yields: a generator, and exact, but it reads the whole file into "
        "memory before the first id",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="tokenizer-byte-ids-are-byte-values",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="self._byte_ids = [token_to_id[bytes([b])] for b in range(256)]",
        new="self._byte_ids = list(range(256))  # byte b is token b",
        why="assumes a single byte's id is its value, as in the vocabularies train_bpe makes: a vocabulary "
        "numbered otherwise (another trainer's) encodes to the wrong ids",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="tokenizer-decode-unknown-id-is-a-key-error",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.decode",
        old=DECODE_LOOKUP,
        new="""data = b"".join(self.vocab[i] for i in ids)""",
        why="looks ids up without a check: an unknown id is a bare KeyError where the contract says ValueError",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="tokenizer-decode-skips-unknown-ids",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.decode",
        old=DECODE_LOOKUP,
        new="""data = b"".join(self.vocab.get(i, b"") for i in ids)  # a model can emit anything: be lenient""",
        why="drops ids it does not know, as it replaces invalid UTF-8: a wrong id silently vanishes from the text",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="tokenizer-unknown-merge-is-a-key-error",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="ids = [token_to_id.get(t) for t in (a, b, a + b)]",
        new="ids = [token_to_id[t] for t in (a, b, a + b)]",
        why="indexes the token table directly: a merge of unknown tokens is a bare KeyError, not the documented "
        "ValueError naming the merge",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="tokenizer-missing-bytes-asserted",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="""if missing:
    raise ValueError(
        f"vocab lacks the single byte(s) {[bytes([b]) for b in missing[:5]]}...; a byte-level BPE "
        "vocab must contain all 256 bytes (ids 0-255 in the ones train_bpe makes)"
    )""",
        new='assert not missing, "a byte-level BPE vocab must contain all 256 bytes"',
        why="checks the vocabulary with assert: an AssertionError where the contract says ValueError (and no "
        "check at all under python -O)",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="bpe-missing-file-is-a-value-error",
        file=f"{PKG}/train.py",
        function="train_bpe",
        old="check_vocab_size(vocab_size, special_tokens)",
        new="""check_vocab_size(vocab_size, special_tokens)
if not os.path.exists(input_path):
    raise ValueError(f"corpus {input_path} does not exist")  # a bad argument, like the others""",
        why="checks the path up front and reports a missing corpus as a ValueError like its other argument "
        "checks, where the contract says FileNotFoundError",
        tests=TRAIN_TESTS,
    ),
]

# Letters and numbers beyond ASCII (issue 31): \w or \d where GPT-2's pattern says \p{L} or \p{N}.
MUTANTS += [
    Mutant(
        name="encode-letters-as-word-characters",
        file=f"{PKG}/pretokenize.py",
        function="_bmp_regex",
        old="""re.compile(rf\"\"\"'(?:[sdmt]|ll|ve|re)| ?[{_L}]+| ?[{_N}]+| ?[^{_S}{_L}{_N}]+|[{_S}]+(?![^{_S}])|[{_S}]+\"\"\")""",
        new="""re.compile(rf\"\"\"'(?:[sdmt]|ll|ve|re)| ?\\w+| ?[{_N}]+| ?[^{_S}\\w{_N}]+|[{_S}]+(?![^{_S}])|[{_S}]+\"\"\")""",
        why="writes \\p{L} as \\w for the standard library's re, which has no \\p{...}: its \\w also takes digits, "
        "superscripts and '_', so x² and H₂O are one pre-token each and snake_case one word",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-numbers-as-decimal-digits",
        file=f"{PKG}/pretokenize.py",
        function="_bmp_regex",
        old="""re.compile(rf\"\"\"'(?:[sdmt]|ll|ve|re)| ?[{_L}]+| ?[{_N}]+| ?[^{_S}{_L}{_N}]+|[{_S}]+(?![^{_S}])|[{_S}]+\"\"\")""",
        new="""re.compile(rf\"\"\"'(?:[sdmt]|ll|ve|re)| ?[{_L}]+| ?\\d+| ?[^{_S}{_L}\\d]+|[{_S}]+(?![^{_S}])|[{_S}]+\"\"\")""",
        why="writes \\p{N} as \\d: ½, ², Ⅻ and ① are not decimal digits, so they fall among the punctuation "
        "(3½ is cut in two, ¼! is one pre-token)",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-letters-as-regex-word-characters",
        file=f"{PKG}/pretokenize.py",
        function="_bmp_regex",
        old='_bmp_ranges(r"\\p{L}")',
        new='_bmp_ranges(r"\\w")',
        why="uses the regex module's \\w for \\p{L}: it also takes combining marks, vowel signs and '_', so "
        "cafe + U+0301 and Devanagari or Thai words with their vowel signs are one pre-token where GPT-2 cuts them",
        tests=TOKENIZER_TESTS,
    ),
]

# The bounds of the code-point range (issue 31): 0..0x10FFFF inclusive, surrogates included.
MUTANTS += [
    Mutant(
        name="character-decode-rejects-the-last-code-point",
        file=f"{PKG}/simple.py",
        function="CharacterTokenizer.decode",
        old="not 0 <= i <= 0x10FFFF",
        new="not 0 <= i < 0x10FFFF",
        why="takes the range's bound 0x10FFFF as exclusive: the last valid code point is refused",
        tests=("tests/test_tokenization.py",),
    ),
    Mutant(
        name="character-decode-rejects-surrogates",
        file=f"{PKG}/simple.py",
        function="CharacterTokenizer.decode",
        old="not 0 <= i <= 0x10FFFF",
        new="not 0 <= i <= 0x10FFFF or 0xD800 <= i <= 0xDFFF",
        why="refuses the surrogates 0xD800..0xDFFF, code points the docstring says decode (chr takes them)",
        tests=("tests/test_tokenization.py",),
    ),
    Mutant(
        name="character-decode-leaves-negative-ids-to-chr",
        file=f"{PKG}/simple.py",
        function="CharacterTokenizer.decode",
        old="not 0 <= i <= 0x10FFFF",
        new="i > 0x10FFFF",
        why="checks only the upper bound: a negative id fails inside chr() with a message that names no id",
        tests=("tests/test_tokenization.py",),
    ),
]

# Pre-tokenization in training over non-ASCII (issue 31): a trainer with its own pattern, \w or \d for
# \p{L} or \p{N}.
COUNT = "counts.update(GPT2_REGEX.findall(segment))"
MUTANTS += [
    Mutant(
        name="train-letters-as-word-characters",
        file=f"{PKG}/pretokenize.py",
        function="count_pretokens",
        old=COUNT,
        new=r"""counts.update(regex.findall(r"'(?:[sdmt]|ll|ve|re)| ?\w+| ?\p{N}+| ?[^\s\w\p{N}]+|\s+(?!\S)|\s+", segment))""",
        why="trains with GPT-2's pattern written with \\w for \\p{L}: x², H₂O and snake_case are one pre-token, "
        "a combining mark or vowel sign joins its letters",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="train-numbers-as-decimal-digits",
        file=f"{PKG}/pretokenize.py",
        function="count_pretokens",
        old=COUNT,
        new=r"""counts.update(regex.findall(r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\d+| ?[^\s\p{L}\d]+|\s+(?!\S)|\s+", segment))""",
        why="trains with GPT-2's pattern written with \\d for \\p{N}: ½, ² and Ⅻ fall among the punctuation, "
        "so ' 3½' is cut in two and '¼!' is one pre-token",
        tests=TRAIN_TESTS,
    ),
]

# Repeats (issue 31): a special token given twice, the same bytes under two ids of a vocabulary.
MUTANTS += [
    Mutant(
        name="train-special-token-given-twice-counted-twice",
        file=f"{PKG}/train.py",
        function="train_bpe",
        old="special_tokens = check_special_tokens(special_tokens)",
        new="check_special_tokens(special_tokens)",
        why="validates the special tokens but keeps the list as given: a repeated one takes two ids and one "
        "merge fewer is learned",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="tokenizer-repeated-special-token-gets-a-second-id",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="""for token in self.special_tokens:
    data = token.encode("utf-8")
    matching = [i for i, t in self.vocab.items() if t == data]
    if matching:
        self._special_ids[token] = max(matching)
    else:
        self._special_ids[token] = max(self.vocab, default=-1) + 1
        self.vocab[self._special_ids[token]] = data""",
        new="""for token in special_tokens or []:
    data = token.encode("utf-8")
    matching = [i for i, t in vocab.items() if t == data]
    if matching:
        self._special_ids[token] = max(matching)
    else:
        self._special_ids[token] = max(self.vocab, default=-1) + 1
        self.vocab[self._special_ids[token]] = data""",
        why="walks the special tokens as given and looks each up in the vocab it was given: a repeated new "
        "special token gets a second fresh id, which then replaces the first",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="tokenizer-duplicate-bytes-take-the-last-id",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="token_to_id.setdefault(self.vocab[i], i)",
        new="token_to_id[self.vocab[i]] = i",
        why="inverts vocab with the last id winning ({v: k for k, v in vocab.items()}): bytes held twice encode "
        "to their higher id",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="tokenizer-special-takes-the-lowest-matching-id",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="self._special_ids[token] = max(matching)",
        new="self._special_ids[token] = min(matching)",
        why="gives a special token held twice in vocab its lower id, where the docstring says the highest",
        tests=TOKENIZER_TESTS,
    ),
]

# Controls (issue 31): the same contracts (code-point bounds, \p{L}/\p{N} pre-tokens, duplicates and
# repeats) in another idiom; each must pass every public and hidden tokenization test.
CONTROLS = [
    Control(
        name="character-control-decode-bounds-sys-maxunicode",
        file=f"{PKG}/simple.py",
        function="CharacterTokenizer.decode",
        old="not 0 <= i <= 0x10FFFF",
        new="i < 0 or i > __import__('sys').maxunicode",
        why="bounds the ids by sys.maxunicode (0x10FFFF) with two comparisons, not the literal chained range",
    ),
    Control(
        name="character-control-decode-lets-chr-check",
        file=f"{PKG}/simple.py",
        function="CharacterTokenizer.decode",
        old="""for i in ids:
    if not 0 <= i <= 0x10FFFF:
        raise ValueError(
            f"id {i} is not a Unicode code point (0..0x10FFFF); was it produced by another tokenizer?"
        )
return "".join(map(chr, ids))""",
        new="""chars = []
for i in ids:
    try:
        chars.append(chr(i))
    except (ValueError, OverflowError):
        raise ValueError(
            f"id {i} is not a Unicode code point (0..0x10FFFF); was it produced by another tokenizer?"
        ) from None
return "".join(chars)""",
        why="lets chr() reject an id out of range and turns its error into the documented ValueError",
    ),
    Control(
        name="encode-control-pretokens-with-the-regex-package",
        file=f"{PKG}/pretokenize.py",
        function="_bmp_regex",
        old="""re.compile(rf\"\"\"'(?:[sdmt]|ll|ve|re)| ?[{_L}]+| ?[{_N}]+| ?[^{_S}{_L}{_N}]+|[{_S}]+(?![^{_S}])|[{_S}]+\"\"\")""",
        new="regex.compile(GPT2_PATTERN)",
        why="pre-tokenizes every text with the regex package's \\p{L}/\\p{N} pattern, not re with spelled-out ranges",
    ),
    Control(
        name="train-control-pretokens-with-finditer",
        file=f"{PKG}/pretokenize.py",
        function="count_pretokens",
        old=COUNT,
        new="counts.update(m.group() for m in regex.finditer(GPT2_PATTERN, segment))",
        why="counts the pre-tokens from regex.finditer over GPT-2's \\p{L}/\\p{N} pattern, not GPT2_REGEX.findall",
    ),
    Control(
        name="tokenizer-control-inverts-vocab-in-descending-order",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="""for i in sorted(self.vocab):
    token_to_id.setdefault(self.vocab[i], i)""",
        new="token_to_id.update({t: i for i, t in sorted(self.vocab.items(), reverse=True)})",
        why="inverts vocab with a dict comprehension over descending ids, so the lowest id of duplicate "
        "bytes is written last and wins",
    ),
    Control(
        name="tokenizer-control-special-takes-the-last-sorted-id",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="self._special_ids[token] = max(matching)",
        new="self._special_ids[token] = sorted(matching)[-1]",
        why="takes the highest matching id as the last of the sorted ids, not max()",
    ),
    Control(
        name="tokenizer-control-dedups-specials-with-dict-fromkeys",
        file=f"{PKG}/tokenizer.py",
        function="Tokenizer.__init__",
        old="self.special_tokens = check_special_tokens(special_tokens)",
        new="""check_special_tokens(special_tokens)
self.special_tokens = list(dict.fromkeys(special_tokens or []))""",
        why="validates the special tokens, then drops repeats with dict.fromkeys (first occurrence kept)",
    ),
    Control(
        name="train-control-dedups-specials-with-dict-fromkeys",
        file=f"{PKG}/train.py",
        function="train_bpe",
        old="special_tokens = check_special_tokens(special_tokens)",
        new="""check_special_tokens(special_tokens)
special_tokens = list(dict.fromkeys(special_tokens or []))""",
        why="validates the special tokens, then drops repeats with dict.fromkeys (first occurrence kept)",
    ),
]

# Bugs only hidden tests catch (issue 31, item 4): each must cost a student at least a point of
# 100 (cs336_staff/audit/hidden_only.py); rubric.toml weighs the hidden tests named here so it does.
HIDDEN_ONLY = [
    # a setting the public tests do not use
    HiddenOnly(
        name="tokenization-special-tokens-numbered-shortest-first",
        file=f"{PKG}/train.py",
        function="train_bpe",
        old="""for token in special_tokens:
    vocab[len(vocab)] = token.encode("utf-8")""",
        new="""for token in sorted(special_tokens, key=len):
    vocab[len(vocab)] = token.encode("utf-8")""",
        why="numbers the special tokens shortest first, the order sorted() by length gives, not the order "
        "given (the public test's two tokens are given shortest first already)",
        hidden=(
            "tests/hidden/test_tokenization.py::test_train_bpe_numbers_three_special_tokens_in_the_order_given",
        ),
    ),
    # an accepted input at the edge of its range
    HiddenOnly(
        name="tokenization-no-room-for-merges-is-an-error",
        file=f"{PKG}/train.py",
        function="train_bpe",
        old="check_vocab_size(vocab_size, special_tokens)",
        new="""need = 256 + len(special_tokens)
if not isinstance(vocab_size, int) or vocab_size <= need:
    raise ValueError(f"vocab_size={vocab_size} is too small: it must be at least {need}")""",
        why="checks the vocabulary size by hand with `<=`, an off-by-one: a vocab_size with room for the "
        "bytes and the special tokens but no merge is refused instead of giving no merges (the public "
        "tests give sizes one short)",
        hidden=(
            "tests/hidden/test_tokenization.py::test_train_bpe_with_vocab_just_big_enough_has_no_merges",
        ),
    ),
]
