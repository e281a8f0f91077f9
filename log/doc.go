// Package log stores one partition in Apache Kafka's on-disk layout: numbered segment files of
// record batches (v2, byte-identical to the wire), a sparse offset index and a time index per
// segment, a leader-epoch checkpoint and the partition.metadata file.
//
// A Log assigns offsets at append time by rewriting each batch's baseOffset and
// partitionLeaderEpoch in place (both lie outside the CRC), deduplicates idempotent producers
// (the last five batches of each producer id, snapshotted to %020d.snapshot at every roll and
// at close) and writes the bytes as received to the active segment through its file
// descriptor. Reads return slices of read-only shared mappings of the segments, touching only
// batch headers; a segment is reference-counted and unmapped only when the log has dropped it
// and the last reader has released it, so the slices can be handed to the kernel for
// zero-copy sends, after which ReadResult.DropMapped gives their pages back. Leader epochs are kept in
// leader-epoch-checkpoint for OffsetForLeaderEpoch.
//
// Open recovers the tail after an unclean shutdown: every segment from the one holding the
// recovery point on is scanned, each batch's length, magic, CRC32C and offsets are checked, the log is truncated at
// the first bad byte and the affected indexes are rebuilt. A batch that failed its CRC is never
// served.
//
// Durability follows Kafka's flush policy (flush.messages, flush.ms) plus group commit:
// SyncAsync waiters share one fsync for everything appended while the previous one ran.
// ApplyRetention deletes whole segments by retention.ms and retention.bytes and below the log
// start offset that DeleteRecordsBefore moves; deleted segments stay mapped until their last
// reader releases them. SetConfig applies changed topic configs to an open log. The files of
// a whole log directory (the clean-shutdown marker, the recovery-point and log-start-offset
// checkpoints) are read and written with the helpers of checkpoint.go.
//
// A follower replica appends the leader's batches unchanged with AppendAsFollower and cuts a
// diverged tail with TruncateTo or starts over with TruncateFullyAndStartAt (replica.go); a
// truncation never changes bytes that a read still holds.
//
// Compacted logs (cleanup.policy=compact) are cleaned by a Cleaner in the background:
// cleaner.go schedules, compact.go rewrites, swap.go replaces segments crash-safely.
//
// Of ringbroker's packages it imports only internal/ ones: internal/recordbatch for the record
// batch v2 layout, internal/crc32c, internal/fsutil for durable file replacement and
// internal/codec to decompress and recompress batches during compaction. It knows nothing of
// wire, ring, raft or broker.
package log
