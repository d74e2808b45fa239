"""A broker's log dirs as partitions and segments (mmap, iteration, checkpoints)."""

from kafkatx.storage.log_dir import LogDir, broker_id_of, log_dirs_of_broker, open_log_dirs
from kafkatx.storage.partition import Partition, parse_partition_dir_name
from kafkatx.storage.segment import Segment, map_file

__all__ = ["LogDir", "Partition", "Segment", "broker_id_of", "log_dirs_of_broker", "map_file", "open_log_dirs",
           "parse_partition_dir_name"]
