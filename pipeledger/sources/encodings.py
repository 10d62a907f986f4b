"""A CSV file's text encoding: where a file stops decoding, and which encoding reads it.

A CSV source is read as ``encoding`` (default UTF-8; a byte-order mark is honoured). A byte
that does not decode stops the run before anything is written, with the file, the line,
the byte offset and the byte, and the encoding that would read the file:

* a UTF-16 byte-order mark: ``utf-16``;
* else the first of UTF-8, Windows-1252 and Latin-1 that decodes the whole file, where
  Windows-1252 is preferred to Latin-1 only when the file holds a byte in 0x80-0x9F (curly
  quotes, the euro sign, dashes: Latin-1 reads those as invisible control characters, and
  for every other byte the two agree). Latin-1 decodes any byte, so it is the last resort:
  check the accents come out right.

The file is read as a stream (a megabyte at a time) only once a problem is seen: a file
that decodes costs nothing here.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20
CP1252_ONLY = bytes(range(0x80, 0xA0))  # where Windows-1252 and Latin-1 differ
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def is_utf8(encoding: str) -> bool:
    """UTF-8 (with or without a byte-order mark), which the CSV reader decodes itself."""
    return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")


def text_encoding(encoding: str) -> str:
    """The codec Python's own readers use for ``encoding``: UTF-8 drops a byte-order mark."""
    return "utf-8-sig" if is_utf8(encoding) else encoding


@dataclass(frozen=True, kw_only=True)
class Undecodable:
    """The first byte of a file that ``encoding`` cannot decode."""

    path: Path
    encoding: str
    offset: int  # of the byte, from the start of the file
    line: int  # 1-based
    byte: int
    text: str  # the line up to and just past the byte, undecodable bytes escaped

    def message(self, pipeline: str | None, suggestion: str | None) -> str:
        where = f"[pipelines.{pipeline}.source]" if pipeline else "the source"
        fix = (
            f'; the file reads as {suggestion}: set encoding = "{suggestion}" in {where}'
            if suggestion
            else f"; set the file's encoding in {where} (encoding = ...)"
        )
        return (
            f"{self.path} line {self.line} (byte offset {self.offset:,}): byte 0x{self.byte:02x} "
            f'is not {self.encoding} text (in "{self.text}"){fix}'
        )


def undecodable(path: Path, encoding: str) -> Undecodable | None:
    """Where ``path`` first fails to decode as ``encoding`` (None: it decodes)."""
    codec = text_encoding(encoding)
    decoder = codecs.getincrementaldecoder(codec)()
    lines, offset = 1, 0
    with path.open("rb") as handle:
        while True:
            chunk = handle.read(CHUNK)
            pending = decoder.getstate()[0]  # bytes held back from the chunk before
            try:
                text = decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                data = pending + chunk
                lines += data[: exc.start].decode(codec, "replace").count("\n")
                at = offset - len(pending) + exc.start
                return Undecodable(
                    path=path,
                    encoding=encoding,
                    offset=at,
                    line=lines,
                    byte=data[exc.start],
                    text=_around(handle, at, encoding),
                )
            if not chunk:
                return None
            lines += text.count("\n")
            offset += len(chunk)


def _around(handle: BinaryIO, at: int, encoding: str) -> str:
    """The line holding byte ``at``, up to a few bytes past it (at most 60 before)."""
    start = max(0, at - 60)
    handle.seek(start)
    data = handle.read(at - start + 12)
    before, after = data[: at - start], data[at - start :]
    line = before[before.rfind(b"\n") + 1 :] + after.split(b"\n")[0]
    text = line.decode(encoding, "backslashreplace").rstrip("\r")
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def suggest(path: Path, failed: str) -> str | None:
    """The encoding that reads ``path`` (module docstring), other than ``failed``."""
    with path.open("rb") as handle:
        head = handle.read(4)
    if head.startswith(UTF16_BOMS):
        return "utf-16"
    tried = codecs.lookup(failed).name
    for candidate in ("utf-8", "cp1252"):
        if codecs.lookup(candidate).name == tried:
            continue
        if candidate == "cp1252" and not _has_any(path, CP1252_ONLY):
            continue
        if undecodable(path, candidate) is None:
            return candidate
    return None if tried == "iso8859-1" else "latin-1"


def _has_any(path: Path, values: bytes) -> bool:
    wanted = set(values)
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            if not wanted.isdisjoint(chunk):
                return True
    return False


def explain(path: Path, encoding: str, pipeline: str | None) -> str | None:
    """The message for a file that does not decode as ``encoding`` (None: it does)."""
    found = undecodable(path, encoding)
    if found is None:
        return None
    return found.message(pipeline, suggest(path, encoding))
