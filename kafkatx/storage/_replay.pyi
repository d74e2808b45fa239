"""Type stub for the optional C extension kafkatx/storage/_replay.c: the compiled twin of
``kafkatx.storage.producer_state.PyProducerStateFold`` (the same methods, results and errors: typed as it)."""

from kafkatx.storage.producer_state import PyProducerStateFold as ProducerStateFold

FOLD_END: int
FOLD_CHUNK: int
FOLD_STOP: int
FOLD_BYTES: int
ENTRY_FIELDS: tuple[str, ...]

__all__ = ["ENTRY_FIELDS", "FOLD_BYTES", "FOLD_CHUNK", "FOLD_END", "FOLD_STOP", "ProducerStateFold"]
