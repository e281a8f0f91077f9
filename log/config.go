package log

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"ringbroker/internal/recordbatch"
)

// Config holds the per-topic storage settings, named after Kafka's topic configs.
type Config struct {
	// SegmentBytes is segment.bytes: the active segment rolls when an append would grow it past
	// this size. At most math.MaxInt32, because index positions are 32-bit.
	SegmentBytes int64
	// SegmentMs is segment.ms: the active segment rolls when the timestamps it covers span
	// longer than this (or, before it has a timestamp, when it is this old). 0 disables.
	SegmentMs time.Duration
	// IndexIntervalBytes is index.interval.bytes: the offset and time indexes get one entry per
	// this many bytes of batches.
	IndexIntervalBytes int
	// MaxIndexBytes is segment.index.bytes: the preallocated size of each index file; a full
	// index rolls the segment.
	MaxIndexBytes int
	// MaxMessageBytes is max.message.bytes: the largest single record batch Append accepts.
	MaxMessageBytes int
	// FlushMessages is flush.messages: Append fsyncs once this many records are unflushed.
	// math.MaxInt64 (the default) leaves durability to replication and the page cache.
	FlushMessages int64
	// FlushInterval is flush.ms: FlushIfDue fsyncs when the last flush is this old. 0 disables.
	FlushInterval time.Duration
	// LogAppendTime is message.timestamp.type=LogAppendTime: Append stamps each batch's
	// maxTimestamp with the broker clock (and recomputes its CRC).
	LogAppendTime bool
	// GroupCommit is flush.group.commit (ringbroker's own): SyncAsync callers share one fsync
	// for everything appended while the previous one ran, so acknowledged produces are on disk
	// without an fsync per append.
	GroupCommit bool
	// DeletePolicy says cleanup.policy includes delete: ApplyRetention removes whole segments
	// by RetentionMs and RetentionBytes, and DeleteRecordsBefore is allowed.
	DeletePolicy bool
	// RetentionMs is retention.ms: ApplyRetention deletes segments whose newest timestamp is
	// older than this (-1: forever).
	RetentionMs int64
	// RetentionBytes is retention.bytes: ApplyRetention deletes the oldest segments while the
	// log stays at least this large without them (-1: unlimited).
	RetentionBytes int64
}

// DefaultConfig returns Kafka's defaults for the settings in Config.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * time.Hour,
		IndexIntervalBytes: 4096,
		MaxIndexBytes:      10 << 20,
		MaxMessageBytes:    1048588,
		FlushMessages:      math.MaxInt64,
		RetentionMs:        7 * 24 * 60 * 60 * 1000,
		RetentionBytes:     -1,
		DeletePolicy:       true,
	}
}

// minSegmentBytes is the smallest segment.bytes accepted: one batch header.
const minSegmentBytes = recordbatch.HeaderSize

// minIndexBytes is the smallest segment.index.bytes accepted: room for two time index entries,
// one of them reserved for the entry written when the segment rolls.
const minIndexBytes = 2 * timeEntrySize

func (c *Config) validate() error {
	switch {
	case c.SegmentBytes < minSegmentBytes || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("segment.bytes=%d; want %d..%d", c.SegmentBytes, minSegmentBytes, math.MaxInt32)
	case c.SegmentMs < 0:
		return fmt.Errorf("segment.ms=%s; want >= 0", c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("index.interval.bytes=%d; want >= 0", c.IndexIntervalBytes)
	case c.MaxIndexBytes < minIndexBytes:
		return fmt.Errorf("segment.index.bytes=%d; want >= %d", c.MaxIndexBytes, minIndexBytes)
	case c.MaxMessageBytes < recordbatch.HeaderSize:
		return fmt.Errorf("max.message.bytes=%d; want >= %d", c.MaxMessageBytes, recordbatch.HeaderSize)
	case c.FlushMessages < 1:
		return fmt.Errorf("flush.messages=%d; want >= 1", c.FlushMessages)
	case c.FlushInterval < 0:
		return fmt.Errorf("flush.ms=%s; want >= 0", c.FlushInterval)
	}
	return nil
}

// Options identifies the partition and carries what the broker knows about the last shutdown.
type Options struct {
	// TopicID is written to partition.metadata; Open fails if the directory holds another id.
	// The zero id adopts whatever the file holds.
	TopicID [16]byte
	// Topic and Partition name the partition in log messages.
	Topic     string
	Partition int32
	// LeaderEpoch is stamped into the partitionLeaderEpoch of appended batches until
	// SetLeaderEpoch changes it.
	LeaderEpoch int32
	// CleanShutdown says the log directory held the clean-shutdown marker (see
	// CleanShutdownMarker): segments are trusted and only their framing is checked. Otherwise
	// every segment from the one holding RecoveryPoint on is CRC-checked and its tail repaired.
	CleanShutdown bool
	// RecoveryPoint is the offset below which the log is known to be flushed, as read from the
	// recovery-point-offset-checkpoint file (see Log.RecoveryPoint). 0 recovers everything.
	RecoveryPoint int64
	// LogStartOffset is the log start offset from the log-start-offset-checkpoint file (see
	// LogStartOffsetFile); Open uses it when it lies inside the log, else the first segment's
	// base offset, and drops segments wholly below it.
	LogStartOffset int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives recovery and I/O reports; nil means slog.Default().
	Logger *slog.Logger
	// Writeback, when set, keeps the log's page cache to its window (log.cache.window.bytes);
	// nil leaves the page cache to the kernel.
	Writeback *Writeback
	// OnFlush, when set, is told how long each flush that fsynced something took, as Kafka's
	// LogFlushRateAndTimeMs times them. It runs on the flushing goroutine and must not block.
	OnFlush func(time.Duration)
}
