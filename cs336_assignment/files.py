"""Writing files so that nothing already on disk is lost.

``atomic_write(path)`` is the one way this package writes a file that may already hold something
valuable (a checkpoint, a token array): the bytes go to a temporary file in the same directory,
which is flushed and ``fsync``-ed, then ``os.replace``-d over ``path`` (an atomic rename on
POSIX), and the directory is ``fsync``-ed so the rename itself survives a power cut. At every
instant ``path`` holds either the old content or the new one, never a truncated mix.

    >>> import tempfile, pathlib
    >>> folder = tempfile.TemporaryDirectory()
    >>> target = pathlib.Path(folder.name) / "hello.bin"
    >>> with atomic_write(target) as f:
    ...     _ = f.write(b"hello")
    >>> target.read_bytes()
    b'hello'
    >>> folder.cleanup()

Deliberately left out: cross-filesystem moves (the temporary file is always beside the target)
and Windows' rename semantics.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Yield a binary file whose content replaces ``path`` only if the block finishes.

    If the block raises, the temporary file is removed and ``path`` is untouched. If the process
    is killed, ``path`` is untouched and a hidden ``.<name>.*.tmp`` file may remain beside it.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        # Atomic: from here on `path` is the new file; up to here it was the old one.
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
