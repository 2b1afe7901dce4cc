"""Tokenization: characters, bytes, words, and byte-level BPE (training, encoding, saving).

    simple.py       CharacterTokenizer, ByteTokenizer, compression_ratio (bytes per token)
    words.py        WordTokenizer: a fixed vocabulary of words, and the UNK problem
    pretokenize.py  GPT-2's regex, special tokens, and where a file can be cut into chunks
    train_slow.py   BPE training, readable: recount every pair after every merge
    train.py        BPE training, fast: parallel pre-tokenization, incremental counts, a heap
    tokenizer.py    Tokenizer: encode / decode / encode_iterable with a trained vocab and merges
    io.py           vocab.json + merges.txt (GPT-2's format), exact for any bytes
"""

from .io import load_bpe, save_bpe
from .pretokenize import GPT2_PATTERN
from .simple import ByteTokenizer, CharacterTokenizer, compression_ratio
from .tokenizer import Tokenizer
from .train import train_bpe
from .train_slow import train_bpe_slow
from .words import WordTokenizer

__all__ = [
    "GPT2_PATTERN",
    "ByteTokenizer",
    "CharacterTokenizer",
    "Tokenizer",
    "WordTokenizer",
    "compression_ratio",
    "load_bpe",
    "save_bpe",
    "train_bpe",
    "train_bpe_slow",
]
