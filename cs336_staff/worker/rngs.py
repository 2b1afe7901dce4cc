"""The global RNGs (Python's ``random``, NumPy's, torch's CPU generator) cross with every message.

In one process a test that calls ``torch.manual_seed(0)`` seeds the code it calls next, and what
that code draws advances the generators the test sees afterwards (``set_seed`` is tested so). To
keep that true across the line, each message carries the sender's global RNG states and the
receiver takes them: the worker draws from the states the judge had, and the judge continues
from the states the worker left. (A module that is not imported on a side is neither sent nor set.)

Only states that changed travel: each side keeps what both sides last agreed on (``Sync``), per
generator, and a message carries the sender's state of a generator only when it differs from that.
Messages strictly alternate, so between two messages only one side runs and the other's states are
still the agreed ones; a side whose states change otherwise (a fresh worker, a reset) forgets the
agreement first. A change is told by a fingerprint: torch's state bytes, and for ``random`` and NumPy
the bytes of their Mersenne Twisters, read in place (``getstate()`` costs ten times more for
``random``, ``get_state()`` a hundred times more for NumPy).
The one change NumPy's fingerprint cannot see is a cached second normal being used up (no twister
step): the other side's copy of that flag then stays stale until NumPy's state next changes, which
matters only to a side that draws normals from NumPy's global generator itself (tests never do).

What this lets the submission do to the judge: choose the judge's global RNG states. Tests never
draw their inputs from the global RNGs (they use seeded ``torch.Generator``/``numpy`` generators of
their own), so those states decide nothing but what the submission's own calls draw.
"""

from __future__ import annotations

import array
import ctypes
import random
import sys
from typing import Any

from .codec import CodecError, Encoder, Tree, bytes_tensor

MT_WORDS = 625  # Python's Mersenne Twister state: 624 words and a position
NUMPY_MT_BYTES = 624 * 4 + 4  # NumPy's MT19937 state struct: 624 uint32 words and an int position
GENERATORS = ("random", "numpy", "torch")


#: Where CPython keeps ``random``'s twister in the object: after the object header, an int position
#: and the 624 words (``_randommodule.c``). Read in place it costs a tenth of ``getstate()``; checked
#: against ``getstate()`` before it is trusted (``_random_in_place``), else ``getstate()`` it is.
RANDOM_STATE_OFFSET, RANDOM_STATE_BYTES = 2 * ctypes.sizeof(ctypes.c_void_p), 4 + 624 * 4
_random_layout_ok: bool | None = None


def _random_in_place() -> Any:
    """A fingerprint of ``random``'s state: its twister's bytes read in place and the cached gauss, or ``getstate()``."""
    global _random_layout_ok
    inst = random._inst  # noqa: SLF001 - the generator behind random's module functions
    if _random_layout_ok is None:
        raw = ctypes.string_at(id(inst) + RANDOM_STATE_OFFSET, RANDOM_STATE_BYTES)
        words = (*array.array("I", raw[4:]), int.from_bytes(raw[:4], sys.byteorder, signed=True))
        _random_layout_ok = type(inst) is random.Random and words == random.getstate()[1]
    if not _random_layout_ok:
        return random.getstate()
    return ctypes.string_at(id(inst) + RANDOM_STATE_OFFSET, RANDOM_STATE_BYTES), inst.gauss_next


def fingerprints() -> dict[str, Any]:
    """A cheap, comparable stand-in for each imported global generator's state (see the module docstring)."""
    out: dict[str, Any] = {"random": _random_in_place()}
    np = sys.modules.get("numpy")
    if np is not None:
        bit_generator = np.random.mtrand._rand._bit_generator
        if type(bit_generator).__name__ == "MT19937":
            out["numpy"] = ctypes.string_at(bit_generator.ctypes.state_address, NUMPY_MT_BYTES)
        else:  # another bit generator set as the global one: its full state
            out["numpy"] = repr(bit_generator.state)
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = torch.get_rng_state().numpy().tobytes()
    return out


def capture(enc: Encoder, generators: tuple[str, ...] = GENERATORS) -> Tree:
    """This side's states of ``generators`` (those imported), as a node of ``enc``'s message."""
    node: dict[str, Any] = {}
    if "random" in generators:
        version, words, gauss = random.getstate()
        node["random"] = [version, enc.blob(array.array("I", words).tobytes()), gauss]
    np = sys.modules.get("numpy")
    if np is not None and "numpy" in generators:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        node["numpy"] = [kind, enc.blob(keys.tobytes()), int(pos), int(has_gauss), float(cached)]
    torch = sys.modules.get("torch")
    if torch is not None and "torch" in generators:
        node["torch"] = enc.blob(torch.get_rng_state().numpy().tobytes())
    return node


class Sync:
    """What this side and the other last agreed each global generator's state was (by fingerprint)."""

    def __init__(self) -> None:
        self.agreed: dict[str, Any] = {}

    def outgoing(self, enc: Encoder) -> Tree | None:
        """The states of the generators that changed since the agreement, as a node of ``enc``'s message
        (None: the other side has them all)."""
        now = fingerprints()
        changed = tuple(name for name, value in now.items() if self.agreed.get(name) != value)
        if not changed:
            return None
        self.agreed.update({name: now[name] for name in changed})
        return capture(enc, changed)

    def incoming(self, node: Any, blobs: list) -> None:
        """Take the other side's states that the message carries (the rest are still the agreed ones)."""
        if node is not None:
            restore(node, blobs)
            now = fingerprints()
            self.agreed.update({name: now[name] for name in GENERATORS if name in node and name in now})

    def forget(self) -> None:
        """The states changed outside the exchange (a fresh worker, a reset): the next message carries them all."""
        self.agreed = {}


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
