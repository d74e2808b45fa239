"""How a record's key/value bytes are shown: UTF-8 text when they are printable, else hex/base64
(``--payload-encoding``). The dump library and the commands share this one rule."""

from __future__ import annotations

import base64
import enum

from kafkatx.errors import UsageError


class PayloadEncoding(enum.StrEnum):
    hex = "hex"
    base64 = "base64"


_WHITESPACE = {ord("\t"): None, ord("\n"): None, ord("\r"): None}  # what may sit among printable text


def encode_payload(data: bytes | bytearray | memoryview | None,
                   encoding: PayloadEncoding | str = PayloadEncoding.hex) -> str | None:
    """A key/value for output: UTF-8 text when it decodes (and is printable), else hex/base64."""
    if data is None:
        return None
    raw = data if type(data) is bytes else bytes(data)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    # Control characters (other than whitespace) mean binary even when the bytes happen to be UTF-8.
    if text is not None and (text.isprintable() or text.translate(_WHITESPACE).isprintable()):
        return text
    enc = getattr(encoding, "value", encoding)
    if enc == "base64":
        return base64.b64encode(raw).decode("ascii")
    if enc == "hex":
        return raw.hex()
    raise UsageError(f"unknown payload encoding {enc!r}; expected hex or base64")
