"""Only declares the optional C extension; all metadata lives in pyproject.toml.

``optional=True``: without a working C compiler the build skips the extension
and kafkatx runs on its pure-Python decoders (same results, slower) and reads
segments with pread instead of guarded mappings.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkatx.format._speedups",
            ["kafkatx/format/_speedups.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        # the coordinator's __transaction_state load, per segment (kafkatx/txn/coordinator.py TxnFold)
        Extension(
            "kafkatx.txn._coordinator",
            ["kafkatx/txn/_coordinator.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        # SIGBUS guard for kafkatx's own file mappings (kafkatx/log/segment.py; without it segments
        # are read with pread instead of mapped)
        Extension(
            "kafkatx.log._mapguard",
            ["kafkatx/log/_mapguard.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
