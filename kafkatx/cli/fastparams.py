"""Option values converted without pydantic: start-up time for every command.

Typer (0.2x) converts every option value through a pydantic ``TypeAdapter`` built on first
use. Importing pydantic and building the adapters costs ~0.3 s per process, more than
``lag`` then spends on a 100 MB segment, for values that are plain strings, integers,
paths and enum choices. :func:`install` gives each parameter of a command a
:class:`FastRuntimeParam` that converts the values kafkatx's options take with plain
Python, *strictly*: a value it does not accept as obviously valid (``" 7"``, ``"1_000"``,
a number below the option's minimum, an unknown choice) goes to Typer's own pydantic
conversion, which gives the value or Typer's exact error message. So every accepted value
is what Typer would give, and every error is Typer's (tests/cli/test_fastparams.py holds
both to Typer's own path for every option of every command).

Typer's conversion layer is internal (``typer._coercion``); where it is absent (another
Typer version) :func:`install` does nothing and Typer converts as it always does. This module is the one
place that touches it; the command classes install it through the :class:`FastParams` mixin. It earns its
place: ``find-hanging`` on ``fixtures/hanging`` takes 0.22 s of CPU with it, 0.41 s without
(``benchmarks/bench_tricks.py --only params``; docs/internals.md, "Speed tricks, measured").
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

try:  # Typer's internal conversion layer (0.2x); absent elsewhere: then nothing is installed
    from typer._click.exceptions import BadParameter
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:  # pragma: no cover - another Typer
    RuntimeParam = None  # type: ignore[assignment,misc]

_INT = re.compile(r"-?[0-9]{1,30}")
_FLOAT = re.compile(r"-?[0-9]{1,30}(\.[0-9]{0,30})?")


class _Reject(Exception):
    """The fast conversion does not vouch for this value: Typer's own conversion decides."""


def _leaf(annotation: Any, info: Any) -> Any:
    """A converter for one value of ``annotation``, or None when the fast path does not handle it."""
    if info.parser is not None or getattr(info, "clamp", False):
        return None
    if annotation is bool:
        def conv_bool(v: Any) -> Any:
            if isinstance(v, bool):
                return v
            raise _Reject  # "yes", "1", ...: Typer's words
        return conv_bool
    if annotation is str:
        def conv_str(v: Any) -> Any:
            if isinstance(v, str):
                return v
            raise _Reject
        return conv_str
    if annotation is int or annotation is float:
        pattern = _INT if annotation is int else _FLOAT
        lo, hi = info.min, info.max

        def conv_num(v: Any) -> Any:
            if type(v) is annotation:
                n = v
            elif isinstance(v, str) and pattern.fullmatch(v):
                n = annotation(v)
            else:
                raise _Reject
            if (lo is not None and n < lo) or (hi is not None and n > hi):
                raise _Reject  # Typer words the range error
            return n
        return conv_num
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        fold = (lambda s: s) if info.case_sensitive else str.casefold
        by_value = {fold(str(m.value)): m for m in annotation}

        def conv_enum(v: Any) -> Any:
            if isinstance(v, annotation):
                return v
            member = by_value.get(fold(v)) if isinstance(v, str) else None
            if member is None:
                raise _Reject
            return member
        return conv_enum
    if annotation is Path and getattr(info, "path_type", None) in (None, Path):
        def conv_path(v: Any) -> Any:
            if isinstance(v, str) and v and "\x00" not in v:
                return Path(v)
            if isinstance(v, Path):
                return v
            raise _Reject
        return conv_path
    return None


if RuntimeParam is not None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class FastRuntimeParam(RuntimeParam):
        """Typer's ``RuntimeParam`` for kafkatx's simple options: plain Python first, Typer's pydantic
        conversion for whatever the plain path does not accept."""

        convert: Any = None
        is_list: bool = False
        is_path: bool = False
        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                if self.is_list:
                    if not isinstance(value, (list, tuple)):
                        raise _Reject
                    out = [self.convert(v) for v in value]
                    if self.is_path:
                        out = [self._path(v, param, ctx) for v in out]
                    return out
                v = self.convert(value)
            except _Reject:
                try:
                    return build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)
                except BadParameter as err:
                    # Typer's value errors speak pydantic ("Input should be a valid integer", "Value error,
                    # ..."): said again in the words of the option's own type.
                    raise BadParameter(plain_message(self.descriptor, value, err.message),
                                       ctx=ctx, param=param) from None
            return self._path(v, param, ctx) if self.is_path else v

        def _path(self, v: Path, param: Any, ctx: Any) -> Any:
            # Typer's checks on a path (exists, file/dir, readable...) with a Path already made.
            return coerce_cli_path(v, self.parameter_info, path_type=Path, param=param, ctx=ctx)


def plain_message(descriptor: Any, value: Any, typer_message: str) -> str:
    """What is wrong with ``value`` for an option of this type, without Python or pydantic terms."""
    annotation, info = descriptor.annotation, descriptor.parameter_info
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation)
        if isinstance(value, (list, tuple)):
            bad = [v for v in value if _leaf(annotation, info) is None or not _accepts(annotation, info, v)]
            value = bad[0] if bad else value
    shown = repr(value) if isinstance(value, str) else str(value)
    if annotation is int or annotation is float:
        kind = "a whole number" if annotation is int else "a number"
        try:
            n = annotation(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            return f"{shown} is not {kind}"
        lo, hi = getattr(info, "min", None), getattr(info, "max", None)
        if lo is not None and n < lo:
            return f"{shown} is below the minimum, {lo}"
        if hi is not None and n > hi:
            return f"{shown} is above the maximum, {hi}"
        return f"{shown} is not {kind}"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return f"{shown} is not one of {', '.join(str(m.value) for m in annotation)}"
    message = typer_message.removeprefix("Value error, ")
    return message.replace("Input should be", "expected")


def _accepts(annotation: Any, info: Any, value: Any) -> bool:
    try:
        _leaf(annotation, info)(value)
    except _Reject:
        return False
    return True


def fast_runtime_param(param: Any) -> Any:
    """The :class:`FastRuntimeParam` for one Typer parameter, or None (Typer's own conversion)."""
    if RuntimeParam is None:
        return None
    td = getattr(param, "type_descriptor", None)
    if td is None or td.file_annotation is not None:
        return None
    annotation, info = td.annotation, td.parameter_info
    is_list = get_origin(annotation) is list
    if is_list:
        (annotation,) = get_args(annotation)
    convert = _leaf(annotation, info)
    if convert is None:
        return None
    return FastRuntimeParam(parameter_info=info, annotation=td.annotation, convert=convert, is_list=is_list,
                            is_path=annotation is Path, descriptor=td)


def install(param: Any) -> None:
    """Give one Typer parameter the fast conversion, when it can take one and has none built yet."""
    if getattr(param, "_runtime_param", "absent") is not None:
        return  # already built, or not a Typer parameter
    fast = fast_runtime_param(param)
    if fast is not None:
        param._runtime_param = fast


def plain_metavar(param: Any) -> None:
    """Help without Python type names (``FILE <list[Path]>``, ``--start-offset <int range>``): a parameter
    with no metavar gets one in the user's words, and an argument's type is not printed beside its name."""
    td = getattr(param, "type_descriptor", None)
    if td is None or getattr(param, "is_flag", False) or getattr(param, "count", False):
        return
    if getattr(param, "param_type_name", "") == "argument":
        param.display_type_rich = lambda ctx: None  # its metavar already names it
    if param.metavar is not None:
        return
    annotation = td.annotation
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        param.metavar = "[" + "|".join(str(m.value) for m in annotation) + "]"
    elif annotation is int:
        param.metavar = "N"
    elif annotation is float:
        param.metavar = "NUMBER"
    elif annotation is Path:
        param.metavar = "PATH"
    elif annotation is str:
        param.metavar = "TEXT"


class FastParams:
    """Mixin for a Typer command or group class: its parameters, the ``--help`` option Click makes on
    the fly included, convert values with :class:`FastRuntimeParam` and show plain metavars in help."""

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            install(param)
            plain_metavar(param)
        return params
