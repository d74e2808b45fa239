"""The kafkatx error hierarchy.

Every error the library raises for bad input is a :class:`KafkaTxError`; the CLI
maps ``exit_code`` to the process exit code (cli.md) and prints ``str(err)`` as
one line on stderr. Decode errors carry the file and the byte position so the
line names both.

Decoders in ``kafkatx.format`` work on buffers and know only positions; the
layer that opened the file attaches the path with :meth:`DecodeError.at`.
"""

from __future__ import annotations

import os

EXIT_OK = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_INTERNAL = 4  # a bug in kafkatx (an exception no layer expected), never bad input


class KafkaTxError(Exception):
    """Base of every error kafkatx raises on purpose. Exit code 3 unless said otherwise."""

    exit_code = EXIT_INPUT


class UsageError(KafkaTxError):
    """Bad flags or a missing/ambiguous source (exit 2)."""

    exit_code = EXIT_USAGE


class DecodeError(KafkaTxError):
    """Bytes that cannot be decoded. Names the file (when known) and the byte position.

    ``position`` is the absolute byte position in the file (or in the buffer the
    decoder was given when no file is known).
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None,
                 position: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.position = position

    def at(self, path: str | os.PathLike[str] | None = None, base: int = 0) -> DecodeError:
        """Return a copy of this error with ``path`` set and ``base`` added to the position.

        Used when a decoder ran on a slice (``base`` = where the slice starts in the
        file) or when the caller knows the file the buffer came from.
        """
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        Exception.__init__(err, self.message)
        if path is not None:
            err.path = os.fspath(path)
        if self.position is not None:
            err.position = self.position + base
        return err

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.position is not None:
            where.append(f"byte {self.position}")
        prefix = ": ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class Truncated(DecodeError):
    """The buffer ends before the structure does."""


class CrcMismatch(DecodeError):
    """A stored checksum does not match the bytes (raised only by strict readers)."""


class BadLength(DecodeError):
    """A length or count field is negative or larger than any sane bound."""


class BadVarint(DecodeError):
    """A varint/varlong runs past its maximum width or past the buffer."""


class UnknownVersion(DecodeError):
    """A magic byte, schema version or file version kafkatx does not know."""


class CompressionError(DecodeError):
    """Compressed data that does not decompress."""


class DecompressionBomb(CompressionError):
    """Compressed data that would expand past the configured limit."""


class MissingFile(KafkaTxError):
    """A file or directory that should exist does not."""


class ReadFailed(KafkaTxError):
    """A file of a log dir could not be opened, listed, stat'ed or read (``could not read FILE: reason``, exit 3).

    The one error every failed read of ``kafkatx/storage/fdio.py`` becomes (an ``OSError``: permission denied, an
    I/O error, a file deleted or shrunk under the reader, too many open files). Neither a
    :class:`DecodeError` nor a :class:`MissingFile`: readers that take bad bytes for a torn tail (where
    Kafka's ``LogLoader`` recovery truncates) or a missing optional file for an absent one never catch it,
    so a failed read is never "the data ends here". ``path``: the file; ``reason``: what failed.
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str], reason: str | None = None,
                 errno: int | None = None) -> None:
        super().__init__(message)
        self.path = os.fspath(path)
        self.reason = reason if reason is not None else message
        self.errno = errno


class LogDirLocked(KafkaTxError):
    """A log dir's ``.lock`` is held by a running broker: repairs refuse it."""


class RepairError(KafkaTxError):
    """A repair or undo that cannot proceed safely (changed files, bad journal, ...)."""


class ClusterError(KafkaTxError):
    """A live cluster could not be reached or refused a request. Names the broker."""


class UnsupportedApi(ClusterError):
    """The broker does not implement an API kafkatx needs."""
