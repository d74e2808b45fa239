"""A schema-driven reader for Kafka's generated messages: the coordinator records (``coordinator-key`` /
``coordinator-value``) and the KRaft metadata records (:mod:`kafkatx.format.cluster_metadata`).

Kafka generates a Java class per JSON schema (``group-coordinator``, ``share-coordinator`` and
``transaction-coordinator/src/main/resources/common/message/*.json``); ``CoordinatorRecordSerde``
reads a record as an int16 record type (the key's first two bytes) and the key fields, then an int16
value version and the value fields at that version. kafkatx states each schema once, as data (field
name, type, versions, tag, default, nullable versions), and reads every schema with the one reader
below, the way the generated ``read(Readable, version)`` methods do:

- a version below ``flexible_from`` reads classic strings, bytes and arrays (int16/int32 lengths);
  from ``flexible_from`` on, compact ones (unsigned varint length + 1) and, after the fields of a
  struct, its tagged fields (unknown tags are skipped, as Kafka keeps them as unknown tagged fields);
- a nullable struct is one int8 marker (negative: null) before its fields, in a tagged field an
  unsigned varint (0: null);
- the result is the JSON the generated ``*JsonConverter.write(message, version)`` gives (what
  ``kafka-dump-log.sh`` prints): camelCase names in schema order, only the fields the version has,
  a tagged field only when it differs from its default, uuids as ``Uuid.toString`` (URL-safe base64),
  bytes as base64, uint16 as a number.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from typing import Any

from kafkatx.errors import UnknownVersion
from kafkatx.format._primitives import Buffer, Reader, reading

NO_TAG = -1


class Field:
    """One schema field. ``typ``: int8 int16 int32 int64 uint16 bool float64 uuid string bytes, ``[]T`` for an
    array of those, or ``("[]", fields)`` / ``("{}", fields)`` for an array of structs / a struct."""

    __slots__ = ("default", "name", "nullable_from", "since", "tag", "typ", "until")

    def __init__(self, name: str, typ: Any, since: int = 0, until: int | None = None, *, tag: int = NO_TAG,
                 default: Any = None, nullable_from: int | None = None) -> None:
        self.name, self.typ, self.since, self.until = name, typ, since, until
        self.tag, self.default, self.nullable_from = tag, default, nullable_from

    def present(self, version: int) -> bool:
        return version >= self.since and (self.until is None or version <= self.until)

    def nullable(self, version: int) -> bool:
        return self.nullable_from is not None and version >= self.nullable_from


def f(name: str, typ: Any, since: int = 0, until: int | None = None, *, tag: int = NO_TAG, default: Any = None,
      nullable: int | None = None) -> Field:
    """A field as its JSON schema states it (``versions``, ``taggedVersions``/``tag``, ``default``,
    ``nullableVersions``); ``name`` is the JSON converter's camelCase name."""
    return Field(name, typ, since, until, tag=tag, default=default, nullable_from=nullable)


class Schema:
    """One message: its name, the versions Kafka reads (``validVersions``), the first flexible version
    (``flexibleVersions``; None: never) and its fields."""

    __slots__ = ("fields", "flexible_from", "highest", "lowest", "name")

    def __init__(self, name: str, fields: Sequence[Field], versions: tuple[int, int] = (0, 0),
                 flexible_from: int | None = 0) -> None:
        self.name, self.fields = name, tuple(fields)
        self.lowest, self.highest = versions
        self.flexible_from = flexible_from

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


def key_schema(name: str, *fields: Field) -> Schema:
    """Every coordinator key: version 0 only, never flexible."""
    return Schema(name, fields, (0, 0), None)


_MIN_SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "bool": 1, "float64": 8, "uuid": 16,
             "string": 1, "bytes": 1}
_F64 = struct.Struct(">d")


def uuid_text(raw: bytes) -> str:
    """``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _scalar(r: Reader, typ: str, name: str, flexible: bool, nullable: bool) -> Any:
    if typ == "int8":
        return r.i8(name)
    if typ == "int16":
        return r.i16(name)
    if typ == "int32":
        return r.i32(name)
    if typ == "int64":
        return r.i64(name)
    if typ == "uint16":
        return r.i16(name) & 0xFFFF
    if typ == "bool":
        return r.i8(name) != 0
    if typ == "float64":
        return _F64.unpack(r.raw(8, name))[0]
    if typ == "uuid":
        return uuid_text(r.raw(16, name))
    if typ == "string":
        return r.compact_string(name, nullable=nullable) if flexible else r.string(name, nullable=nullable)
    if typ == "bytes":
        raw = r.compact_bytes(name, nullable=nullable) if flexible else r.bytes_(name, nullable=nullable)
        return None if raw is None else base64.b64encode(raw).decode()
    raise UnknownVersion(f"coordinator schema: unknown type {typ!r} for {name}")


def _count(r: Reader, name: str, min_size: int, flexible: bool, nullable: bool) -> int | None:
    if flexible:
        return r.compact_array_count(name, min_size, nullable=nullable)
    return r.array_count(name, min_size, nullable=nullable)


def _value(r: Reader, fld: Field, version: int, flexible: bool, tagged: bool = False) -> Any:
    typ, name, nullable = fld.typ, fld.name, fld.nullable(version)
    if isinstance(typ, tuple):
        kind, fields = typ
        if kind == "{}":
            # a nullable struct's presence: an int8 (-1 null, 1 present); in a tagged field an unsigned
            # varint (0 null), MessageDataGenerator.generateStructReader
            if nullable and (r.uvarint(f"{name} presence") <= 0 if tagged else r.i8(f"{name} presence") < 0):
                return None
            return read_struct(r, fields, version, flexible, name)
        n = _count(r, name, 1, flexible, nullable)
        return None if n is None else [read_struct(r, fields, version, flexible, name) for _ in range(n)]
    if typ.startswith("[]"):
        item = typ[2:]
        n = _count(r, name, _MIN_SIZE[item], flexible, nullable)
        return None if n is None else [_scalar(r, item, name, flexible, False) for _ in range(n)]
    return _scalar(r, typ, name, flexible, nullable)


def read_struct(r: Reader, fields: Sequence[Field], version: int, flexible: bool, what: str) -> dict[str, Any]:
    """The ``fields`` of one struct at ``version`` (``flexible``: compact forms and tagged fields), as the
    JSON converter writes them."""
    plain: dict[str, Any] = {}
    tagged: dict[int, Field] = {}
    for fld in fields:
        if not fld.present(version):
            continue
        if fld.tag != NO_TAG:
            tagged[fld.tag] = fld
        else:
            plain[fld.name] = _value(r, fld, version, flexible)
    found: dict[str, Any] = {}
    if flexible:
        for tag, _size, raw in r.tagged_fields(f"{what} tagged fields"):
            known = tagged.get(tag)
            if known is None:
                continue  # an unknown tag: the generated reader keeps it as unknown tagged fields, unprinted
            with reading(raw, f"{what}.{known.name}") as tr:
                found[known.name] = _value(tr, known, version, True, tagged=True)
    out: dict[str, Any] = {}
    for fld in fields:  # schema order; a tagged field only when it differs from its default
        if not fld.present(version):
            continue
        if fld.tag == NO_TAG:
            out[fld.name] = plain[fld.name]
        elif fld.name in found and found[fld.name] != fld.default:
            out[fld.name] = found[fld.name]
    return out


def read_message(r: Reader, schema: Schema, version: int) -> dict[str, Any]:
    """``schema`` at ``version`` from ``r`` (the version already read), as its JSON converter writes it.
    A version outside ``validVersions`` is :class:`~kafkatx.errors.UnknownVersion` (the generated
    ``read`` throws ``UnsupportedVersionException``)."""
    if not schema.lowest <= version <= schema.highest:
        raise UnknownVersion(f"Can't read version {version} of {schema.name}", position=max(r.pos - 2, 0))
    return read_struct(r, schema.fields, version, schema.flexible(version), schema.name)


def read_value(data: Buffer, schema: Schema) -> tuple[int, dict[str, Any]]:
    """A record value: its int16 version, then ``schema`` at that version, to the last byte
    (``CoordinatorRecordSerde.deserialize``'s value half)."""
    with reading(data, schema.name) as r:
        version = r.i16("value version")
        fields = read_message(r, schema, version)
        r.expect_end()
        return version, fields


__all__ = ["NO_TAG", "Field", "Schema", "f", "key_schema", "read_message", "read_struct", "read_value", "uuid_text"]
