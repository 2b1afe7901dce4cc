"""Tokenization: characters, bytes, words, and byte-level BPE (training, encoding, saving).

    simple.py       CharacterTokenizer, ByteTokenizer, compression_ratio (bytes per token)
    words.py        WordTokenizer: a fixed vocabulary of words, and the UNK problem
    pretokenize.py  GPT-2's regex, special tokens, and where a file can be cut into chunks
    train_slow.py   BPE training, readable: recount every pair after every merge
    train.py        BPE training, fast: parallel pre-tokenization, incremental counts, a heap
    tokenizer.py    Tokenizer: encode / decode / encode_iterable with a trained vocab and merges
    io.py           vocab.json + merges.txt (GPT-2's format), exact for any bytes

Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
    May use: the Python standard library, regex (for the GPT-2 pattern), multiprocessing.
    Not allowed: tokenizer libraries (tiktoken, Hugging Face tokenizers or transformers,
        sentencepiece, rustbpe, ...) may not be used: train and apply BPE yourself (the tests use
        them only as oracles); and, as in every part: torch.optim's optimizers, torch.nn.Linear or
        F.linear, FlopCounterMode or the profiler, torch.amp.GradScaler, reaching the tests or the
        interpreter's insides.
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
