"""The global RNGs (Python's ``random``, NumPy's, torch's CPU generator) cross with every message.

In one process a test that calls ``torch.manual_seed(0)`` seeds the code it calls next, and what
that code draws advances the generators the test sees afterwards (``set_seed`` is tested so). To
keep that true across the line, each message carries the sender's global RNG states and the
receiver takes them: the worker draws from the states the judge had, and the judge continues
from the states the worker left. (A module that is not imported on a side is neither sent nor set.)

What this lets the submission do to the judge: choose the judge's global RNG states. Tests never
draw their inputs from the global RNGs (they use seeded ``torch.Generator``/``numpy`` generators of
their own), so those states decide nothing but what the submission's own calls draw.
"""

from __future__ import annotations

import array
import random
import sys
from typing import Any

from .codec import CodecError, Encoder, Tree, bytes_tensor

MT_WORDS = 625  # Python's Mersenne Twister state: 624 words and a position


def capture(enc: Encoder) -> Tree:
    """This side's global RNG states, as a node of ``enc``'s message."""
    version, words, gauss = random.getstate()
    node: dict[str, Any] = {"random": [version, enc.blob(array.array("I", words).tobytes()), gauss]}
    np = sys.modules.get("numpy")
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        node["numpy"] = [kind, enc.blob(keys.tobytes()), int(pos), int(has_gauss), float(cached)]
    torch = sys.modules.get("torch")
    if torch is not None:
        node["torch"] = enc.blob(torch.get_rng_state().numpy().tobytes())
    return node


def restore(node: Any, blobs: list) -> None:
    """Take the other side's global RNG states (CodecError if they are not valid states)."""
    if not isinstance(node, dict):
        raise CodecError("RNG states must be an object")

    def blob(index: Any) -> bytes:
        if not isinstance(index, int) or not 0 <= index < len(blobs):
            raise CodecError(f"blob index {index!r} out of range")
        return bytes(blobs[index])

    try:
        if "random" in node:
            version, words, gauss = node["random"]
            state = array.array("I", blob(words))
            if len(state) != MT_WORDS:
                raise CodecError(f"random's state has {len(state)} words, not {MT_WORDS}")
            random.setstate((int(version), tuple(state), None if gauss is None else float(gauss)))
        np = sys.modules.get("numpy")
        if np is not None and "numpy" in node:
            kind, keys, pos, has_gauss, cached = node["numpy"]
            np.random.set_state((str(kind), np.frombuffer(blob(keys), dtype=np.uint32).copy(), int(pos),
                                 int(has_gauss), float(cached)))
        torch = sys.modules.get("torch")
        if torch is not None and "torch" in node:
            torch.set_rng_state(bytes_tensor(blob(node["torch"])))
    except CodecError:
        raise
    except Exception as e:  # a malformed state: the sender's fault, reported as such
        raise CodecError(f"not a valid RNG state: {type(e).__name__}: {e}") from None
