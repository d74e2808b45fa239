"""kafkatx's CLI with ``storage.fanout.fan_out`` replaced by a ``concurrent.futures.ProcessPoolExecutor``
(fork context) doing the same runs: the first run in this process, the others one task each in the pool's
forked workers, results back as msgpack bytes in order. No per-item ticks (the progress bar) and no
stalled-child watchdog (``KAFKATX_CHILD_SILENCE``): what the pool does not give. A measurement prototype for
``bench_tricks.py --only fanout``, not shipped.

    python benchmarks/ppe_fanout.py verify --log-dir DIR"""
from __future__ import annotations

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import msgspec

from kafkatx.storage import fanout

_WORK: Any = None  # (each, items): inherited by the forked workers


def _run(start: int, stop: int) -> bytes:
    each, items = _WORK
    # results as msgpack bytes: the rows are msgspec Structs (pickle would do too, slower)
    out: bytes = msgspec.msgpack.encode([each(x) for x in items[start:stop]])
    return out


def fan_out(each: Any, items: Any, result: Any, *, jobs: int, done: Any = None) -> list[Any]:
    global _WORK
    cuts = fanout.runs(len(items), jobs)
    if len(cuts) <= 1:
        return fanout._serial(each, items, done)
    _WORK = (each, items)
    decoder = msgspec.msgpack.Decoder(list[result])
    with ProcessPoolExecutor(len(cuts) - 1, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [pool.submit(_run, r.start, r.stop) for r in cuts[1:]]
        out = fanout._serial(each, [items[i] for i in cuts[0]], done)
        for r, fut in zip(cuts[1:], futures, strict=True):
            got = decoder.decode(fut.result())
            out.extend(got)
            if done is not None:
                for i in r:
                    done(items[i])
    return out  # type: ignore[no-any-return]


import kafkatx.checks.verify as verify  # noqa: E402
import kafkatx.session.offline as offline  # noqa: E402

fanout.fan_out = verify.fan_out = offline.fan_out = fan_out
sys.argv[0] = "kafkatx"
from kafkatx.cli.main import run  # noqa: E402

run()
