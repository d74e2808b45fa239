"""Only declares the optional C extension; all metadata lives in pyproject.toml.

``optional=True``: without a working C compiler the build skips the extension
and kafkatx runs on its pure-Python decoders (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkatx.format._speedups",
            ["kafkatx/format/_speedups.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
