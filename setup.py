"""Declares the optional C extensions and the man pages; all other metadata lives in pyproject.toml.

``optional=True``: without a working C compiler the build skips the extensions
and kafkatx runs on its pure-Python decoders (same results, slower) and reads
segments with pread instead of guarded mappings.

One compiled module per Python module it speeds up, each in that module's layer,
over one header of wire helpers (kafkatx/format/_wire.h); see docs/internals.md.

``KAFKATX_PURE_PYTHON=1`` at build time builds no extension at all: a pure-Python wheel
(``py3-none-any``), the same package a machine without a compiler gets. The man pages
(``man/*.1``, made by ``man/generate.py``) go to ``share/man/man1`` of the environment.
"""

import os
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
WIRE = ["kafkatx/format/_wire.h", "kafkatx/format/_framer.h"]  # the wire helpers, the one batch framer
TXN_LOG = "kafkatx/format/_txn_log.h"  # the __transaction_state record decoder (_txn_log.c, coordinator/_coordinator.c)

# The one module these replaced (kafkatx/format/_speedups.c, before the split by layer): nothing imports it any
# more, but an in-place build left from before would still sit beside the sources; remove it.
for stale in (HERE / "kafkatx" / "format").glob("_speedups*.so"):
    stale.unlink(missing_ok=True)


PURE = os.environ.get("KAFKATX_PURE_PYTHON", "") not in ("", "0")
MAN_PAGES = sorted(str(p.relative_to(HERE)) for p in (HERE / "man").glob("*.1"))


def compiled(name: str, depends: list[str]) -> Extension:
    source = name.replace(".", "/") + ".c"
    return Extension(name, [source], depends=depends, extra_compile_args=["-O2"], optional=True)


EXTENSIONS = [
    compiled("kafkatx.format._batch", WIRE),  # record_batch.py: framing, records, CRC-32C
    compiled("kafkatx.format._fold", WIRE),  # segment_fold.py: the segment fold
    compiled("kafkatx.format._txn_log", [*WIRE, TXN_LOG]),  # txn_log.py: __transaction_state records
    compiled("kafkatx.storage._replay", WIRE),  # storage/producer_state.py: the compiled ProducerStateFold
    compiled("kafkatx.coordinator._coordinator", [*WIRE, TXN_LOG]),  # coordinator/state_manager.py: the __transaction_state load (TxnFold)
    compiled("kafkatx.render._dump", WIRE),  # render/kafka_dump.py: kafka-dump-log rendering
    # SIGBUS guard for kafkatx's own file mappings (kafkatx/storage/segment.py; without it segments
    # are read with pread instead of mapped)
    compiled("kafkatx.storage._mapguard", []),
    compiled("kafkatx.storage._partition", []),  # storage/partition.py: a folder's listing, its small files' reads
]

setup(
    ext_modules=[] if PURE else EXTENSIONS,
    data_files=[("share/man/man1", MAN_PAGES)],
)
