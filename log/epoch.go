package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"ringbroker/internal/fsutil"
)

// leaderEpochFile is Kafka's leader-epoch checkpoint in the partition directory.
const leaderEpochFile = "leader-epoch-checkpoint"

// undefinedEpoch and undefinedEpochOffset are Kafka's answers for an epoch the log cannot place.
const (
	undefinedEpoch       = -1
	undefinedEpochOffset = -1
)

// epochEntry says leader epoch epoch started at offset start.
type epochEntry struct {
	epoch int32
	start int64
}

// epochCache is Kafka's LeaderEpochFileCache: the start offset of each leader epoch, epochs and
// start offsets both strictly increasing. Guarded by Log.mu.
type epochCache struct {
	entries []epochEntry
}

// assign records that epoch starts at start, as LeaderEpochFileCache.assign: nothing changes
// when the latest entry already covers it; otherwise entries that conflict (an epoch >= epoch
// or a start >= start) are dropped first. It reports whether the cache changed.
func (c *epochCache) assign(epoch int32, start int64) bool {
	if epoch < 0 {
		return false
	}
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.epoch == epoch && last.start <= start {
			return false
		}
	}
	kept := c.entries[:0]
	for _, e := range c.entries {
		if e.epoch < epoch && e.start < start {
			kept = append(kept, e)
		}
	}
	c.entries = append(kept, epochEntry{epoch: epoch, start: start})
	return true
}

// isNewer reports whether epoch is newer than every known epoch: assignIfNewer would record it.
func (c *epochCache) isNewer(epoch int32) bool {
	n := len(c.entries)
	return n == 0 || epoch > c.entries[n-1].epoch
}

// assignIfNewer records epoch at start only when it is newer than every known epoch; used
// while scanning batches, so that checkpointed entries (including one assigned at a leader
// change before any batch) survive.
func (c *epochCache) assignIfNewer(epoch int32, start int64) bool {
	if !c.isNewer(epoch) {
		return false
	}
	return c.assign(epoch, start)
}

// truncateFromEnd removes the epochs that start at or after end, as
// LeaderEpochFileCache.truncateFromEnd: after a truncation to end no batch of them is left.
func (c *epochCache) truncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].start >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// endOffsetFor answers OffsetForLeaderEpoch as LeaderEpochFileCache.endOffsetFor: for the
// latest epoch, the log end offset; for an older one, the largest known epoch <= it and the
// start offset of the first epoch after it; (-1, -1) when the epoch is undefined or newer than
// all known epochs.
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	n := len(c.entries)
	switch {
	case epoch == undefinedEpoch || n == 0:
		return undefinedEpoch, undefinedEpochOffset
	case c.entries[n-1].epoch == epoch:
		return epoch, logEnd
	}
	hi := 0 // first entry with an epoch > epoch
	for hi < n && c.entries[hi].epoch <= epoch {
		hi++
	}
	if hi == n {
		return undefinedEpoch, undefinedEpochOffset
	}
	if hi == 0 {
		return epoch, c.entries[0].start
	}
	return c.entries[hi-1].epoch, c.entries[hi].start
}

// marshal writes the checkpoint format: version 0, the entry count, then "epoch start" lines.
func (c *epochCache) marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.start)
	}
	return b.Bytes()
}

// parseEpochCheckpoint reads the checkpoint format written by marshal (and by Kafka).
func parseEpochCheckpoint(data []byte) (epochCache, error) {
	var c epochCache
	lines, err := CheckpointLines(data, 2)
	if err != nil {
		return c, err
	}
	for i, fields := range lines {
		epoch, err1 := strconv.ParseInt(fields[0], 10, 32)
		start, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return c, fmt.Errorf("entry %d %q: want \"<epoch> <start offset>\"", i, strings.Join(fields, " "))
		}
		if n := len(c.entries); n > 0 && (int32(epoch) <= c.entries[n-1].epoch || start < c.entries[n-1].start) {
			return c, fmt.Errorf("entry %d (%d, %d) does not follow (%d, %d)", i, epoch, start, c.entries[n-1].epoch, c.entries[n-1].start)
		}
		c.entries = append(c.entries, epochEntry{epoch: int32(epoch), start: start})
	}
	return c, nil
}

// checkpointLines parses Kafka's checkpoint file framing: a version line (0), a count line,
// then count lines of exactly width space-separated fields.
func CheckpointLines(data []byte, width int) ([][]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	version, ok := next()
	if !ok || version != "0" {
		return nil, fmt.Errorf("version line %q; want \"0\"", version)
	}
	countLine, _ := next()
	count, err := strconv.Atoi(countLine)
	if err != nil || count < 0 {
		return nil, fmt.Errorf("count line %q; want a non-negative integer", countLine)
	}
	lines := make([][]string, 0, min(count, 1024))
	for i := range count {
		line, ok := next()
		if !ok {
			return nil, fmt.Errorf("%d entries; header says %d", i, count)
		}
		fields := strings.Fields(line)
		if len(fields) != width {
			return nil, fmt.Errorf("entry %d %q: %d fields; want %d", i, line, len(fields), width)
		}
		lines = append(lines, fields)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	return lines, nil
}

// loadEpochs reads the leader-epoch checkpoint; a damaged one is dropped and rebuilt from the
// batches.
func (l *Log) loadEpochs() {
	path := filepath.Join(l.dir, leaderEpochFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		l.epochs, err = parseEpochCheckpoint(data)
	}
	if err != nil {
		l.logger.Warn("ignoring leader-epoch checkpoint; rebuilding it from the batches", "file", path, "err", err)
		l.epochs = epochCache{}
		l.epochsDirty = true
	}
}

// writeEpochs durably writes the leader-epoch checkpoint if it changed.
func (l *Log) writeEpochs() error {
	if !l.epochsDirty {
		return nil
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(l.dir, leaderEpochFile), l.epochs.marshal()); err != nil {
		return fmt.Errorf("write leader-epoch checkpoint: %w", err)
	}
	l.epochsDirty = false
	return nil
}

// SetLeaderEpoch sets the epoch stamped into appended batches and records, as Kafka does when
// a replica becomes leader, that the epoch starts at the current log end offset. An epoch older
// than the latest known one is refused.
func (l *Log) SetLeaderEpoch(epoch int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("set leader epoch of %s: %w", l.dir, ErrClosed)
	}
	if n := len(l.epochs.entries); n > 0 && epoch < l.epochs.entries[n-1].epoch {
		return fmt.Errorf("set leader epoch of %s: epoch %d is older than the latest known epoch %d", l.dir, epoch, l.epochs.entries[n-1].epoch)
	}
	l.leaderEpoch = epoch
	if l.epochs.assign(epoch, l.leo.Load()) {
		l.epochsDirty = true
	}
	return l.writeEpochs()
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the leader-epoch cache: the largest
// epoch <= epoch that the log knows and the offset where the next epoch starts (the log end
// offset for the latest epoch); for an epoch older than all known ones, that epoch and the
// start of the first known one, as Kafka does; (-1, -1) when unknown.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epochs.endOffsetFor(epoch, l.leo.Load())
}

// LatestEpoch returns the newest epoch of the leader-epoch cache: what a follower sends as
// LastFetchedEpoch so that the leader can tell where their logs diverge (KIP-320). ok is false
// when the cache is empty.
func (l *Log) LatestEpoch() (epoch int32, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.epochs.entries); n > 0 {
		return l.epochs.entries[n-1].epoch, true
	}
	return undefinedEpoch, false
}

// truncateEpochs drops the epochs that start at or after end and rewrites the checkpoint if
// that changed anything. Called under mu.
func (l *Log) truncateEpochs(end int64) error {
	if l.epochs.truncateFromEnd(end) {
		l.epochsDirty = true
	}
	if err := l.writeEpochs(); err != nil {
		return fmt.Errorf("truncate leader epochs of %s at %d: %w", l.dir, end, err)
	}
	return nil
}
