package log

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"ringbroker/internal/fsutil"
)

// Names of Kafka's per-log-directory files.
const (
	// CleanShutdownFile is the marker a broker writes into each log directory after closing
	// every log in it, and removes once it has opened them again (see Options.CleanShutdown).
	CleanShutdownFile = ".kafka_cleanshutdown"
	// RecoveryPointFile holds each partition's recovery point (see Log.RecoveryPoint).
	RecoveryPointFile = "recovery-point-offset-checkpoint"
	// LogStartOffsetFile holds each partition's log start offset (see Log.LogStartOffset), so
	// that DeleteRecords survives a restart.
	LogStartOffsetFile = "log-start-offset-checkpoint"
	// partitionMetadataFile holds the topic id in the partition directory.
	partitionMetadataFile = "partition.metadata"
	// deletedSuffix marks the files of a segment dropped by retention whose last reader has not
	// released it yet; leftovers are removed on Open, as Kafka does with its .deleted files.
	deletedSuffix = ".deleted"
)

// HasCleanShutdownMarker reports whether logDir holds the clean-shutdown marker.
func HasCleanShutdownMarker(logDir string) (bool, error) {
	_, err := os.Stat(filepath.Join(logDir, CleanShutdownFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("stat clean-shutdown marker in %s: %w", logDir, err)
}

// WriteCleanShutdownMarker durably creates the clean-shutdown marker in logDir. Write it only
// after every log in the directory is closed.
func WriteCleanShutdownMarker(logDir string) error {
	if err := fsutil.WriteFileAtomic(filepath.Join(logDir, CleanShutdownFile), nil); err != nil {
		return fmt.Errorf("write clean-shutdown marker: %w", err)
	}
	return nil
}

// RemoveCleanShutdownMarker durably removes the marker from logDir, so that a crash from now
// on is recovered. A missing marker is not an error.
func RemoveCleanShutdownMarker(logDir string) error {
	err := os.Remove(filepath.Join(logDir, CleanShutdownFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove clean-shutdown marker in %s: %w", logDir, err)
	}
	return fsutil.SyncDir(logDir)
}

// TopicPartition keys the per-log-directory offset checkpoint files.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// WriteOffsetCheckpoint durably writes Kafka's offset checkpoint format (version 0, count,
// "topic partition offset" lines) to path; used for recovery-point-offset-checkpoint.
func WriteOffsetCheckpoint(path string, offsets map[TopicPartition]int64) error {
	keys := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		if tp.Topic == "" || strings.ContainsAny(tp.Topic, " \t\r\n") {
			return fmt.Errorf("write offset checkpoint %s: topic %q cannot be stored", path, tp.Topic)
		}
		keys = append(keys, tp)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(keys))
	for _, tp := range keys {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, offsets[tp])
	}
	if err := fsutil.WriteFileAtomic(path, b.Bytes()); err != nil {
		return fmt.Errorf("write offset checkpoint: %w", err)
	}
	return nil
}

// ReadOffsetCheckpoint reads a file written by WriteOffsetCheckpoint (or Kafka). A missing
// file yields an empty map.
func ReadOffsetCheckpoint(path string) (map[TopicPartition]int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read offset checkpoint: %w", err)
	}
	lines, err := CheckpointLines(data, 3)
	if err != nil {
		return nil, fmt.Errorf("parse offset checkpoint %s: %w", path, err)
	}
	out := make(map[TopicPartition]int64, len(lines))
	for i, f := range lines {
		part, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("parse offset checkpoint %s: entry %d %q: want \"<topic> <partition> <offset>\"", path, i, strings.Join(f, " "))
		}
		out[TopicPartition{Topic: f[0], Partition: int32(part)}] = off
	}
	return out, nil
}

// marshalPartitionMetadata renders partition.metadata as Kafka does: the topic id in
// unpadded URL-safe base64 (Uuid.toString).
func marshalPartitionMetadata(id [16]byte) []byte {
	return []byte("version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n")
}

// parsePartitionMetadata reads the topic id from partition.metadata.
func parsePartitionMetadata(data []byte) ([16]byte, error) {
	var id [16]byte
	var version, topicID string
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "version":
			version = strings.TrimSpace(v)
		case "topic_id":
			topicID = strings.TrimSpace(v)
		}
	}
	if version != "0" {
		return id, fmt.Errorf("version %q; want \"0\"", version)
	}
	raw, err := base64.RawURLEncoding.DecodeString(topicID)
	if err != nil || len(raw) != len(id) {
		return id, fmt.Errorf("topic_id %q is not a base64 UUID", topicID)
	}
	copy(id[:], raw)
	return id, nil
}

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
