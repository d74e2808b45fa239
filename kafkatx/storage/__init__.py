"""Kafka's storage module, offline: a broker's log dirs as ``LogLoader`` loads them (log_dir, partition, segment,
loading), the producer state ``ProducerStateManager`` rebuilds (producer_state, fold, replay), the last stable
offset (lso) and tiered storage (tiered, remote_log, remote_log_metadata). Import the modules themselves: this
package imports nothing, so a compiled module of the room loads alone."""
