"""The files of a file source: which files a path names (a file, a folder or a glob), each
as seen (path, size, modification time), and a file's content hash.

Nothing here imports pyarrow: a run that finds its folder unchanged
(``incremental = "files"``, :mod:`pipeledger.runs.load.files`) lists and compares files
without loading the readers.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

HASH_CHUNK = 1 << 20


def list_files(pattern: Path) -> list[Path]:
    """Files matching ``pattern``, sorted: the file itself, the files of a folder (not its
    hidden ones, not its subfolders), or a glob's matches (``**`` crosses folders)."""
    if pattern.is_dir():
        found = (p for p in pattern.iterdir() if p.is_file())
        return sorted(p for p in found if not p.name.startswith("."))
    matches = glob.glob(str(pattern), recursive=True)
    return sorted(Path(p) for p in matches if Path(p).is_file())


@dataclass(frozen=True)
class FileSeen:
    """A file as a run saw it: its path, size and modification time (nanoseconds)."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileSeen:
        stat = path.stat()
        return cls(str(path), stat.st_size, stat.st_mtime_ns)


def content_hash(path: Path) -> str:
    """A 128-bit BLAKE2b digest of the file's bytes, as hex: what tells a file rewritten
    with other rows from one only copied or touched (a new modification time)."""
    import hashlib  # here: `pipeledger state`, which hashes nothing, need not load OpenSSL

    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
