"""Which tests need which device: the one definition of the device markers.

    gpu    needs CUDA (``uv run pytest -m gpu`` selects them; they skip with the reason on a CPU)
    fp8    needs fp8 tensor-core matmuls: compute capability >= 8.9 (Ada, Hopper)
    h100   needs an H100-class GPU: compute capability >= 9.0

Every such test has a CPU twin, named in its docstring, that runs the same code path everywhere.
The staff grade the marked tests on GPU runners.
"""

from __future__ import annotations

#: marker -> the smallest CUDA compute capability it needs
DEVICE_MARKERS: dict[str, tuple[int, int]] = {"gpu": (0, 0), "fp8": (8, 9), "h100": (9, 0)}


def skip_reason(markers: set[str], capability: tuple[int, int] | None) -> str | None:
    """Why a test with these markers cannot run on a device of this capability (None: it can).

    >>> skip_reason({"fp8"}, None)
    'needs a CUDA GPU; none on this machine (its CPU twin ran instead)'
    >>> skip_reason({"gpu", "fp8"}, (8, 0))
    'needs fp8 matmuls (compute capability >= 8.9), this GPU is (8, 0)'
    >>> skip_reason({"gpu"}, (8, 0)) is None
    True
    """
    needed = [m for m in DEVICE_MARKERS if m in markers]
    if not needed:
        return None
    if capability is None:
        return "needs a CUDA GPU; none on this machine (its CPU twin ran instead)"
    if "fp8" in needed and capability < DEVICE_MARKERS["fp8"]:
        return f"needs fp8 matmuls (compute capability >= 8.9), this GPU is {capability}"
    if "h100" in needed and capability < DEVICE_MARKERS["h100"]:
        return f"needs an H100-class GPU (compute capability >= 9.0), this GPU is {capability}"
    return None
