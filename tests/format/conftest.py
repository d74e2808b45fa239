"""Shared Hypothesis strategies for the record-batch tests."""

from __future__ import annotations

import hypothesis.strategies as st

from kafkatx.format.record_batch import Record

blobs = st.one_of(st.none(), st.binary(max_size=300))
header_keys = st.text(max_size=20)
headers = st.lists(st.tuples(header_keys, blobs), max_size=4).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn, *, with_headers: bool = True, min_size: int = 1,
                 max_size: int = 12) -> list[Record]:
    """Records with increasing offsets (gaps allowed) and timestamps around a base."""
    n = draw(st.integers(min_size, max_size))
    offset = draw(st.integers(0, 2**40))
    base_ts = draw(st.integers(0, 2**42))
    out = []
    for _ in range(n):
        out.append(Record(offset=offset, timestamp=base_ts + draw(st.integers(0, 10**7)),
                          key=draw(blobs), value=draw(blobs),
                          headers=draw(headers) if with_headers else ()))
        offset += draw(st.integers(1, 70000))
    return out
