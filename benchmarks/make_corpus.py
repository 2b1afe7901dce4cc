"""Build the benchmark corpus: ~90 MB of real English from documentation that Debian packages ship.

    uv run python benchmarks/make_corpus.py            # writes benchmarks/data/corpus-90mb.txt and corpus-5mb.txt

Sources (downloaded with ``apt-get download``, unpacked with ``dpkg-deb -x``, never installed):
the reST sources of ``linux-doc-6.1`` and ``python3.11-doc``, ``perl-doc``'s POD, the entries of
``dict-gcide``, ``dict-foldoc`` and ``dict-jargon``, and ``fortunes``. Each source file (or
dictionary entry group, or fortune) is one document; documents are shuffled with a fixed seed and
joined with ``<|endoftext|>``, like TinyStories and OpenWebText in CS336. No synthetic text.

What it leaves out: any cleaning beyond decoding as UTF-8 (undecodable bytes are replaced), and
any de-duplication; the point is a realistic, reproducible corpus, not a curated one.
"""

from __future__ import annotations

import argparse
import gzip
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

PACKAGES = [
    "linux-doc-6.1",
    "python3.11-doc",
    "perl-doc",
    "dict-gcide",
    "dict-foldoc",
    "dict-jargon",
    "fortunes",
]
SEPARATOR = "<|endoftext|>"
DATA = Path(__file__).resolve().parent / "data"


def fetch(work: Path) -> Path:
    """Download and unpack the packages into ``work/root``; reuse an earlier unpack."""
    root = work / "root"
    if root.exists():
        return root
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *PACKAGES], cwd=debs, check=True)
    tmp = work / "root.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)
    tmp.rename(root)
    return root


def _read(path: Path) -> str:
    raw = gzip.decompress(path.read_bytes()) if path.suffix in (".gz", ".dz") else path.read_bytes()
    return raw.decode("utf-8", errors="replace")


def _dictionary_documents(path: Path, entries_per_doc: int = 20) -> Iterator[str]:
    """Entries of a dictd database, in groups, using its ``.index`` (word, b64 offset, b64 length)."""
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def b64(s: str) -> int:
        n = 0
        for ch in s:
            n = n * 64 + digits.index(ch)
        return n

    body = gzip.decompress(path.read_bytes())
    spans = []
    for line in _read(path.with_suffix("").with_suffix(".index")).splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and not parts[0].startswith("00-database"):
            spans.append((b64(parts[1]), b64(parts[2])))
    spans = sorted(set(spans))
    for i in range(0, len(spans), entries_per_doc):
        group = spans[i : i + entries_per_doc]
        yield "\n".join(body[o : o + n].decode("utf-8", errors="replace").strip() for o, n in group)


def documents(root: Path) -> Iterator[str]:
    """Every document of every source, in a fixed order."""
    share = root / "usr" / "share"
    for path in sorted((share / "doc" / "linux-doc-6.1").rglob("*.rst*")):
        yield _read(path)
    for path in sorted((share / "doc").rglob("_sources/**/*.txt")):
        yield _read(path)
    for path in sorted(root.rglob("*.pod")):
        yield _read(path)
    for path in sorted((share / "dictd").glob("*.dict.dz")):
        yield from _dictionary_documents(path)
    fortunes = share / "games" / "fortunes"
    for path in sorted(fortunes.iterdir()) if fortunes.exists() else []:
        if path.is_file() and not path.suffix:
            yield from (f.strip() for f in _read(path).split("\n%\n") if f.strip())


def build(out_dir: Path, megabytes: float, small_megabytes: float, seed: int) -> tuple[Path, Path]:
    """Shuffle the documents with ``seed`` and write the first ``megabytes`` MB (and a small slice)."""
    root = fetch(out_dir / "debian")
    docs = [d.strip() for d in documents(root) if d.strip()]
    random.Random(seed).shuffle(docs)
    big, small = (
        out_dir / f"corpus-{megabytes:g}mb.txt",
        out_dir / f"corpus-{small_megabytes:g}mb.txt",
    )
    limit, written = int(megabytes * 1e6), 0
    with open(big, "w", encoding="utf-8") as f:
        for doc in docs:
            chunk = doc + "\n" + SEPARATOR + "\n"
            if written + len(chunk.encode()) > limit:
                break
            f.write(chunk)
            written += len(chunk.encode())
    text = big.read_bytes()[: int(small_megabytes * 1e6)]
    cut = text.rfind((SEPARATOR + "\n").encode())
    small.write_bytes(text[: cut + len(SEPARATOR) + 1])
    return big, small


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DATA)
    parser.add_argument("--megabytes", type=float, default=90)
    parser.add_argument("--small-megabytes", type=float, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in build(args.out, args.megabytes, args.small_megabytes, args.seed):
        print(f"{path}  {path.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
