from __future__ import annotations

import pytest
from log_builders import data_batch, write_index, write_segment

from kafkatx.errors import DecodeError, MissingFile, ReadFailed
from kafkatx.format.checkpoint import encode_leader_epoch_checkpoint, encode_offset_checkpoint
from kafkatx.storage.log_dir import LogDir, open_log_dirs
from kafkatx.storage.partition import Partition, parse_partition_dir_name
from kafkatx.storage.segment import Segment, map_file


@pytest.mark.parametrize(("name", "expected"), [
    ("orders-0", ("orders", 0)),
    ("my-topic-with-dashes-12", ("my-topic-with-dashes", 12)),
    ("dotted.topic.name-3", ("dotted.topic.name", 3)),
    ("__transaction_state-49", ("__transaction_state", 49)),
    ("topic-1-2", ("topic-1", 2)),
    ("orders-0.9c1a1b9e0e8c4b5fa3b2f1a0d9c8b7a6-delete", None),
    ("orders-0.9c1a1b9e0e8c4b5fa3b2f1a0d9c8b7a6-future", None),
    ("orders-0.9c1a1b9e0e8c4b5fa3b2f1a0d9c8b7a6-stray", None),
    ("orders", None),
    ("orders-", None),
    ("-3", None),
    ("orders-01", None),  # Kafka never zero-pads partition numbers
    ("bad topic-0", None),  # space is not a legal topic character
    ("t-99999999999", None),  # beyond a Java int
])
def test_parse_partition_dir_name(name, expected):
    assert parse_partition_dir_name(name) == expected


def test_log_dir_lists_partitions_sorted_and_skips_deleted(tmp_path):
    for name in ["b-1", "a-10", "a-2", "a-0.abcdef-delete", "a-1.abcdef-future", "not_a_partition"]:
        (tmp_path / name).mkdir()
    (tmp_path / "meta.properties").write_text("version=1\n")
    log_dir = LogDir(tmp_path)
    assert [(p.topic, p.partition) for p in log_dir.partitions()] == [("a", 2), ("a", 10), ("b", 1)]
    assert len(log_dir.skipped) == 3
    assert any("a-0.abcdef-delete" in s and "deletion" in s for s in log_dir.skipped)
    assert any("a-1.abcdef-future" in s and "future" in s for s in log_dir.skipped)
    assert any("not_a_partition" in s for s in log_dir.skipped)
    assert log_dir.partitions()[0].name == "a-2"
    assert log_dir.partitions()[0].log_dir is log_dir


def test_checkpoints_and_clean_shutdown(tmp_path):
    (tmp_path / "t-0").mkdir()
    (tmp_path / "replication-offset-checkpoint").write_text(encode_offset_checkpoint({("t", 0): 42, ("u", 3): 7}))
    (tmp_path / "log-start-offset-checkpoint").write_text(encode_offset_checkpoint({("t", 0): 5}))
    log_dir = LogDir(tmp_path)
    assert log_dir.high_watermarks == {("t", 0): 42, ("u", 3): 7}
    assert log_dir.recovery_points == {}
    assert log_dir.clean_shutdown is False
    assert log_dir.lock_path == tmp_path / ".lock"
    assert log_dir.partitions()[0].log_start_offset == 5
    (tmp_path / ".kafka_cleanshutdown").write_text("")
    assert log_dir.clean_shutdown is True


def test_bad_checkpoint_names_file_and_position(tmp_path):
    (tmp_path / "replication-offset-checkpoint").write_text("0\n1\nt zero 5\n")
    with pytest.raises(DecodeError) as info:
        _ = LogDir(tmp_path).high_watermarks
    assert info.value.path == str(tmp_path / "replication-offset-checkpoint")
    assert info.value.position is not None and info.value.position > 0


def test_open_log_dirs_missing(tmp_path):
    (tmp_path / "meta.properties").write_text("node.id=1\n")
    with pytest.raises(MissingFile, match="no such log dir"):
        open_log_dirs([tmp_path, tmp_path / "nope"])


def test_a_dir_that_is_no_log_dir_is_refused_naming_the_log_dirs_below_it(tmp_path):
    # cli.md: no meta.properties, no checkpoint file and no topic-N folder -> unreadable input.
    with pytest.raises(MissingFile, match=r"not a Kafka log dir \(no meta.properties"):
        LogDir(tmp_path)  # empty
    (tmp_path / "dbus-1").mkdir()  # named like a partition, holds no Kafka file (as in /etc)
    (tmp_path / "dbus-1" / "system.conf").write_text("x")
    broker = tmp_path / "kafka" / "broker-1"  # two levels down
    broker.mkdir(parents=True)
    (broker / "meta.properties").write_text("node.id=1\n")
    data = tmp_path / "data"
    write_segment(data / "orders-0", 0, [data_batch(0)])
    with pytest.raises(MissingFile) as err:
        LogDir(tmp_path)
    msg = str(err.value)
    assert "these subfolders look like log dirs" in msg and str(broker) in msg and str(data) in msg
    assert "dbus-1" not in msg
    with pytest.raises(MissingFile, match="looks like a partition folder: give its log dir"):
        LogDir(data / "orders-0")
    with pytest.raises(MissingFile, match="not a directory"):
        LogDir(broker / "meta.properties")
    assert [p.name for p in LogDir(data).partitions()] == ["orders-0"]  # a topic-N folder is enough
    assert LogDir(broker).partitions() == []  # meta.properties is enough


def test_partition_segments_snapshots_epochs(tmp_path):
    folder = tmp_path / "t-0"
    write_segment(folder, 10, [data_batch(10)])
    write_segment(folder, 0, [data_batch(0)])
    (folder / f"{0:020d}.index").write_bytes(b"")
    (folder / f"{10:020d}.txnindex").write_bytes(b"")
    (folder / f"{0:020d}.log.deleted").write_bytes(b"junk")  # leftovers are not segments
    (folder / f"{12:020d}.snapshot").write_bytes(b"")
    (folder / f"{2:020d}.snapshot").write_bytes(b"")
    (folder / "leader-epoch-checkpoint").write_text(encode_leader_epoch_checkpoint([(0, 0), (3, 10)]))
    part = Partition(folder)
    assert (part.topic, part.partition, part.name) == ("t", 0, "t-0")
    assert [s.base_offset for s in part.segments] == [0, 10]
    assert part.segments[0].index_path == folder / f"{0:020d}.index"
    assert part.segments[0].txnindex_path is None
    assert part.segments[1].txnindex_path == folder / f"{10:020d}.txnindex"
    assert [o for o, _ in part.snapshots] == [2, 12]
    assert part.leader_epochs == [(0, 0), (3, 10)]
    assert part.log_start_offset == 0  # no checkpoint: first segment base
    assert [(h.base_offset, h.last_offset) for _, h in part.iter_batches()] == [(0, 1), (10, 11)]


def test_iter_batches_start_offset_seeks_with_index(tmp_path):
    folder = tmp_path / "t-0"
    batches = [data_batch(0), data_batch(2), data_batch(4)]
    path, positions = write_segment(folder, 0, batches)
    # Corrupt the first batch's magic byte: only a reader that seeks past it via the index survives.
    raw = bytearray(path.read_bytes())
    raw[16] = 9
    path.write_bytes(bytes(raw))
    write_index(folder, 0, [(3, positions[1])])
    part = Partition(folder)
    got = [(seg.base_offset, h.base_offset, h.position) for seg, h in part.iter_batches(start_offset=3)]
    assert got == [(0, 2, positions[1]), (0, 4, positions[2])]
    with pytest.raises(DecodeError) as info:
        list(part.iter_batches())
    assert info.value.path == str(path) and info.value.position == 16  # the bad magic byte


def test_iter_batches_skips_segments_before_start(tmp_path):
    folder = tmp_path / "t-0"
    write_segment(folder, 0, [data_batch(0)])
    write_segment(folder, 2, [data_batch(2), data_batch(4)])
    part = Partition(folder)
    assert [h.base_offset for _, h in part.iter_batches(start_offset=5)] == [4]
    assert [h.base_offset for _, h in part.iter_batches(start_offset=100)] == []
    with_buffers = list(part.iter_batch_buffers(start_offset=2))
    assert [h.base_offset for _, _, h in with_buffers] == [2, 4]


def test_map_file_empty_and_missing(tmp_path):
    empty = tmp_path / f"{0:020d}.log"
    empty.write_bytes(b"")
    with map_file(empty) as buf:
        assert buf == b""
    seg = Segment.from_log_path(empty)
    assert seg.size == 0
    with seg.open() as buf:
        assert list(seg.iter_batches(buf)) == []
    # a failed read is the I/O layer's one error (storage/fdio.py), never a MissingFile a reader could skip
    with pytest.raises(ReadFailed, match=r"could not read .*nope.log: no such file"), map_file(tmp_path / "nope.log"):
        pass


def test_segment_truncated_error_names_file_and_position(tmp_path):
    path, positions = write_segment(tmp_path / "t-0", 0, [data_batch(0), data_batch(2)])
    path.write_bytes(path.read_bytes()[:-5])
    seg = Segment.from_log_path(path)
    with seg.open() as buf, pytest.raises(DecodeError) as info:
        list(seg.iter_batches(buf))
    assert info.value.path == str(path)
    assert info.value.position == positions[1]
    assert str(path) in str(info.value) and f"byte {positions[1]}" in str(info.value)


def test_segment_map_is_read_only(tmp_path):
    path, _ = write_segment(tmp_path / "t-0", 0, [data_batch(0)])
    with Segment.from_log_path(path).open() as buf, pytest.raises(TypeError):
        buf[0] = 1  # ACCESS_READ maps refuse writes


def test_seek_position_reads_the_index_only_as_far_as_it_needs(tmp_path):
    from kafkatx.storage.partition import seek_position

    folder = tmp_path / "t-0"
    path, _positions = write_segment(folder, 100, [data_batch(100 + 2 * i) for i in range(8)])
    size = path.stat().st_size
    index = write_index(folder, 100, [(101, 0), (104, 200), (108, 400), (112, 9_999_999), (113, 500)])
    seg = Partition(folder).segments[0]
    # the entry with the largest offset <= the one asked for; one pointing past the log is ignored
    assert [seek_position(seg, o, size) for o in (99, 100, 101, 103, 104, 107, 108, 112, 113, 10**6)] == [
        0, 0, 0, 0, 200, 200, 400, 400, 500, 500]
    # Kafka's preallocated tail of zeros ends the entries; garbage after it is never read
    index.write_bytes(index.read_bytes()[:16] + bytes(8 * 3) + b"\xff" * 8)
    assert [seek_position(seg, o, size) for o in (103, 104, 10**6)] == [0, 200, 200]
    # a partial trailing entry makes the whole index untrusted (read_offset_index refuses it) ...
    index.write_bytes(index.read_bytes()[:16] + b"\x00\x00\x00")
    assert seek_position(seg, 104, size) == 0
    # ... unless zeros end the entries before it
    index.write_bytes(index.read_bytes()[:16] + bytes(8) + b"\x00\x00\x00")
    assert seek_position(seg, 104, size) == 200
