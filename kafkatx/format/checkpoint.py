"""Checkpoint text files.

Kafka (``server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java``,
``storage/.../checkpoint/OffsetCheckpointFile.java``, ``LeaderEpochCheckpointFile.java``)::

    <version>\\n            0 for both kinds
    <entry count>\\n
    <entry>\\n ...          offset checkpoints: "topic partition offset"
                            leader-epoch-checkpoint: "epoch startOffset"

Reading follows ``CheckpointReadBuffer.read``: an empty file, or one holding only
the version line, is an empty checkpoint; the version must match; every
following line is an entry split on ``\\s+`` (so a line with leading blanks, an
empty line or a wrong number of fields is malformed); the number of entries
must equal the count line. Numbers are Java ``Integer/Long.parseInt``: optional
sign, ASCII digits, range-checked (Python's ``int()`` also accepts ``_`` and
surrounding blanks, which Kafka does not, so we use a regex).
Topic names cannot contain whitespace in Kafka, which is why the
space-separated layout is unambiguous.

Errors carry the byte position (UTF-8) of the start of the bad line:
:class:`UnknownVersion` for the version line, :class:`BadLength` for a count
that does not match the entries, :class:`DecodeError` for a malformed line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping

from kafkatx.errors import BadLength, DecodeError, UnknownVersion

OFFSET_CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT_VERSION = 0

_INT = re.compile(r"[+-]?[0-9]+")
# java.util.regex \s: [ \t\n\x0B\f\r]
_WS = re.compile(r"[ \t\n\x0b\f\r]+")
# BufferedReader.readLine ends a line at \n, \r or \r\n
_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")

_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)


def _lines(text: str) -> Iterator[tuple[int, int, str]]:
    """(line number from 1, byte position, line) the way BufferedReader.readLine splits them."""
    pos = 0
    char = 0
    n = len(text)
    number = 0
    while char < n:
        m = _LINE.match(text, char)
        assert m is not None  # the pattern always matches (possibly empty at end)
        line = m.group(1)
        number += 1
        yield number, pos, line
        consumed = m.end() - char
        pos += len(text[char : m.end()].encode("utf-8", "surrogatepass"))
        char += consumed
        if consumed == 0:  # pragma: no cover - defensive
            break


def _parse_int(token: str, bounds: tuple[int, int]) -> int | None:
    if not _INT.fullmatch(token):
        return None
    # Java's parseInt/parseLong take any number of leading zeros; the value is range-checked.
    # Python's int() refuses more than 4300 digits with ValueError, so a number whose
    # significant digits cannot fit 64 bits is out of range before int() ever sees it.
    digits = token.lstrip("+-").lstrip("0")
    if len(digits) > 19:
        return None
    value = -int(digits or "0") if token[0] == "-" else int(digits or "0")
    if not bounds[0] <= value <= bounds[1]:
        return None
    return value


def _shown(line: str) -> str:
    """A line for an error message: repr'd, and cut so a 5,000-digit number stays one readable line."""
    return repr(line) if len(line) <= 80 else repr(line[:60]) + f"... ({len(line)} characters)"


def _read(text: str, version: int, kind: str, width: int) -> list[tuple[int, int, list[str]]]:
    """Validate the header and return (line number, byte position, fields) per entry line."""
    lines = _lines(text)
    first = next(lines, None)
    if first is None:
        return []
    number, pos, line = first
    v = _parse_int(line, _I32)
    if v is None:
        raise DecodeError(f"{kind}: line {number}: malformed version line {_shown(line)}", position=pos)
    if v != version:
        raise UnknownVersion(f"{kind}: line {number}: unrecognised version {v}, expected {version}", position=pos)
    second = next(lines, None)
    if second is None:
        return []
    count_number, count_pos, line = second
    expected = _parse_int(line, _I32)
    if expected is None:
        raise DecodeError(f"{kind}: line {count_number}: malformed entry count line {_shown(line)}",
                          position=count_pos)
    entries: list[tuple[int, int, list[str]]] = []
    for number, pos, line in lines:
        fields = _WS.split(line)
        # Java's String.split drops trailing empty strings but keeps a leading one
        while fields and fields[-1] == "":
            fields.pop()
        if len(fields) != width or fields[0] == "":
            raise DecodeError(f"{kind}: line {number}: malformed line {_shown(line)} (expected {width} fields)",
                              position=pos)
        entries.append((number, pos, fields))
    if len(entries) != expected:
        raise BadLength(f"{kind}: line {count_number}: expected {expected} entries but found {len(entries)}",
                        position=count_pos)
    return entries


# A well-formed offset checkpoint body as the broker writes it: "topic partition offset" lines, one space
# apart, each ended by \n. Such a body is read in one pass (:func:`_plain_offset_entries`); anything
# else goes line by line through _read, which states the rules and names what is wrong.
_PLAIN_ENTRY = r"([^ \t\n\x0b\f\r]+) ([+-]?[0-9]{1,19}) ([+-]?[0-9]{1,19})\n"
# the body check captures nothing and never backtracks (possessive): no regex state kept per line
_PLAIN_BODY = re.compile("(?:" + _PLAIN_ENTRY.replace("(", "(?:") + ")*+")
_PLAIN_ENTRIES = re.compile(_PLAIN_ENTRY)
_PLAIN_HEAD = re.compile(r"([+-]?[0-9]{1,10})\n([+-]?[0-9]{1,10})\n")


def _plain_offset_entries(text: str, version: int) -> dict[tuple[str, int], int] | None:
    """:func:`read_offset_checkpoint`'s answer for a file of plain lines (no ``\\r``, single spaces, every
    line ended, every number in range, the count right); None for anything else (read line by line).
    At 10,000 partitions the two checkpoints the loader reads hold 10,000 lines each."""
    head = _PLAIN_HEAD.match(text)
    if head is None or "\r" in text or int(head.group(1)) != version:
        return None
    body = head.end()
    if _PLAIN_BODY.fullmatch(text, body) is None:
        return None
    lo32, hi32 = _I32
    lo64, hi64 = _I64
    out: dict[tuple[str, int], int] = {}
    n = 0
    for topic, part_s, off_s in _PLAIN_ENTRIES.findall(text, body):
        partition, offset = int(part_s), int(off_s)
        if not (lo32 <= partition <= hi32 and lo64 <= offset <= hi64):
            return None
        out[(topic, partition)] = offset
        n += 1
    return out if n == int(head.group(2)) else None


def read_offset_checkpoint(text: str, *, version: int = OFFSET_CHECKPOINT_VERSION) -> dict[tuple[str, int], int]:
    """``replication-offset-checkpoint`` and friends: {(topic, partition): offset}. Later lines win."""
    plain = _plain_offset_entries(text, version)
    return plain if plain is not None else _offset_lines(text, version)


def _offset_lines(text: str, version: int) -> dict[tuple[str, int], int]:
    """:func:`read_offset_checkpoint` line by line (every file that is not plain; the errors)."""
    kind = "offset checkpoint"
    out: dict[tuple[str, int], int] = {}
    for number, pos, (topic, part_s, off_s) in _read(text, version, kind, 3):
        partition = _parse_int(part_s, _I32)
        offset = _parse_int(off_s, _I64)
        if partition is None or offset is None:
            bad = "partition" if partition is None else "offset"
            raise DecodeError(f"{kind}: line {number}: malformed line {_shown(' '.join((topic, part_s, off_s)))} "
                              f"({bad} is not a number in range)", position=pos)
        out[(topic, partition)] = offset
    return out


def read_leader_epoch_checkpoint(text: str, *,
                                 version: int = LEADER_EPOCH_CHECKPOINT_VERSION) -> list[tuple[int, int]]:
    """``leader-epoch-checkpoint``: [(epoch, start_offset)] in file order."""
    kind = "leader epoch checkpoint"
    out: list[tuple[int, int]] = []
    for number, pos, (epoch_s, off_s) in _read(text, version, kind, 2):
        epoch = _parse_int(epoch_s, _I32)
        offset = _parse_int(off_s, _I64)
        if epoch is None or offset is None:
            bad = "epoch" if epoch is None else "start offset"
            raise DecodeError(f"{kind}: line {number}: malformed line {_shown(epoch_s + ' ' + off_s)} "
                              f"({bad} is not a number in range)", position=pos)
        out.append((epoch, offset))
    return out


def encode_offset_checkpoint(offsets: Mapping[tuple[str, int], int], *,
                             version: int = OFFSET_CHECKPOINT_VERSION) -> str:
    """Kafka's layout, entries sorted by (topic, partition) for reproducible files."""
    lines = [str(version), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        if not topic or _WS.search(topic):
            raise ValueError(f"topic name {topic!r} is empty or contains whitespace")
        lines.append(f"{topic} {partition} {offset}")
    return "\n".join(lines) + "\n"


def encode_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]], *,
                                   version: int = LEADER_EPOCH_CHECKPOINT_VERSION) -> str:
    items = list(entries)
    lines = [str(version), str(len(items))] + [f"{epoch} {offset}" for epoch, offset in items]
    return "\n".join(lines) + "\n"
