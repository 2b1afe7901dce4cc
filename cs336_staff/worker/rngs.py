"""The global RNGs (Python's ``random``, NumPy's, torch's CPU generator) cross with every message.

In one process a test that calls ``torch.manual_seed(0)`` seeds the code it calls next, and what
that code draws advances the generators the test sees afterwards (``set_seed`` is tested so). To
keep that true across the line, each message carries the sender's global RNG states and the
receiver takes them: the worker draws from the states the judge had, and the judge continues
from the states the worker left. (A module that is not imported on a side is neither sent nor set.)

Only states that changed travel: each side keeps the states both sides last agreed on (``Sync``)
and a message carries its sender's states only when they differ from those. Messages strictly
alternate, so between two messages only one side runs and the other's states are still the agreed
ones; a side that changes them otherwise (a fresh worker, a reset) forgets the agreement first.

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


States = tuple  # (random's, numpy's or None, torch's bytes or None): comparable, as ``current`` reads them


def current() -> States:
    """This side's global RNG states (numpy's and torch's where imported)."""
    version, words, gauss = random.getstate()
    np = sys.modules.get("numpy")
    numpy_state = None
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        numpy_state = (str(kind), keys.tobytes(), int(pos), int(has_gauss), float(cached))
    torch = sys.modules.get("torch")
    return ((int(version), array.array("I", words).tobytes(), gauss), numpy_state,
            torch.get_rng_state().numpy().tobytes() if torch is not None else None)


def capture(enc: Encoder, states: States | None = None) -> Tree:
    """This side's global RNG states (or ``states``), as a node of ``enc``'s message."""
    (version, words, gauss), numpy_state, torch_state = states if states is not None else current()
    node: dict[str, Any] = {"random": [version, enc.blob(words), gauss]}
    if numpy_state is not None:
        kind, keys, pos, has_gauss, cached = numpy_state
        node["numpy"] = [kind, enc.blob(keys), pos, has_gauss, cached]
    if torch_state is not None:
        node["torch"] = enc.blob(torch_state)
    return node


class Sync:
    """The global RNG states this side and the other last agreed on; a message carries only a change."""

    def __init__(self) -> None:
        self.agreed: States | None = None

    def outgoing(self, enc: Encoder) -> Tree | None:
        """This side's states as a node of ``enc``'s message, or None where the other side has them already."""
        now = current()
        if now == self.agreed:
            return None
        self.agreed = now
        return capture(enc, now)

    def incoming(self, node: Any, blobs: list) -> None:
        """Take the other side's states, if the message carries any (else this side's are still the agreed ones)."""
        if node is not None:
            restore(node, blobs)
            self.agreed = current()

    def forget(self) -> None:
        """The states changed outside the exchange (a fresh worker, a reset): the next message carries them."""
        self.agreed = None


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
