package broker

// Several log dirs (log.dirs, JBOD), as Kafka's LogManager keeps them: every dir is formatted
// (meta.properties with the cluster id, the node id and its own directory.id) and keeps the
// clean-shutdown marker and the recovery-point, replication-offset and log-start-offset
// checkpoints of the partitions it holds. A partition is opened where its directory is found;
// a new one goes to the online dir holding the fewest partitions (ties: the first in log.dirs),
// unless AlterReplicaLogDirs named a dir for it first. The metadata log stays in the first dir.
//
// An I/O error on a write, flush, roll or checkpoint of a dir takes the dir offline, as Kafka's
// LogDirFailureChannel does: its partitions answer KAFKA_STORAGE_ERROR, stop being flushed,
// checkpointed or cleaned, and DescribeLogDirs reports the dir with that error; the other dirs
// keep serving.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"ringbroker/broker/meta"
	"ringbroker/internal/fsutil"
	rlog "ringbroker/log"
)

// logDir is one directory of log.dirs.
type logDir struct {
	path string    // absolute
	id   meta.UUID // directory.id of its meta.properties
	// failure holds the I/O error that took the dir offline; nil while it is online.
	failure atomic.Pointer[error]
	// parts counts the partition logs (current, not future) in the dir, for placement.
	parts atomic.Int32
	// startup is what the previous run left in the dir, used while opening the partitions
	// found at start and cleared after.
	startup startupState
}

// offline reports whether an I/O error took d offline.
func (d *logDir) offline() bool { return d.failure.Load() != nil }

// err is the error that took d offline, nil while online.
func (d *logDir) err() error {
	if e := d.failure.Load(); e != nil {
		return *e
	}
	return nil
}

// Suffixes of the directories of a partition being moved between dirs (AlterReplicaLogDirs),
// after Kafka's: <topic>-<partition>.<uuid>-future is the copy being made in the target dir,
// <topic>-<partition>.<uuid>-delete the replaced log, removed once the copy took its place.
const (
	futureDirSuffix = "-future"
	deleteDirSuffix = "-delete"
)

// movedDirName is the name of a future or deleted partition directory: the partition's
// directory name, a dot, a random uuid as 32 hex digits (Java's UUID without its dashes, as
// Kafka names them) and the suffix.
func movedDirName(partDir, suffix string) string {
	id := meta.NewUUID()
	return filepath.Base(partDir) + "." + hex.EncodeToString(id[:]) + suffix
}

// movedDirPartition is the partition directory name a future or deleted directory name
// belongs to, or "" when name is neither.
func movedDirPartition(name, suffix string) string {
	base, ok := strings.CutSuffix(name, suffix)
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(base, '.')
	if i < 0 || len(base)-i-1 != 32 {
		return ""
	}
	return base[:i]
}

// openLogDirs formats every dir of cfg.LogDirs that is not yet (with clusterID), reads its
// directory.id and what the last run left in it, and finishes the moves a crash interrupted in
// their swap; it returns the dirs, the copies of moves to resume and the partitions whose move
// is parked, and passes the deleted logs' directories to removeLater (finishMoves). The same
// dir named twice counts once. A dir other than the first that fails with an I/O error is
// offline from the start, as Kafka's LogManager starts with the dirs it could open; the first
// holds the metadata log, and its failure stops the start, as Kafka stops when its
// metadata.log.dir fails.
func openLogDirs(cfg *Config, clusterID string, logger *slog.Logger, removeLater func(dir string)) ([]*logDir, []futureLog, map[string]bool, error) {
	var dirs []*logDir
	ids := map[meta.UUID]string{}
	for _, d := range cfg.LogDirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("log dir %s: %w", d, err)
		}
		if containsDir(dirs, abs) {
			continue
		}
		ld, err := openLogDir(abs, cfg.NodeID, clusterID, logger)
		switch {
		case err != nil && len(dirs) > 0 && isStorageError(err):
			logger.Error("log dir unusable at start; it is offline, and so are the replicas in it", "dir", abs, "err", err)
			ld = &logDir{path: abs}
			ld.failure.Store(&err)
		case err != nil:
			return nil, nil, nil, err
		default:
			if other, ok := ids[ld.id]; ok {
				return nil, nil, nil, fmt.Errorf("log dirs %s and %s have the same directory.id %s", other, abs, ld.id)
			}
			ids[ld.id] = abs
		}
		dirs = append(dirs, ld)
	}
	futures, parked, err := finishMoves(dirs, logger, removeLater)
	if err != nil {
		return nil, nil, nil, err
	}
	return dirs, futures, parked, nil
}

// openLogDir formats the log dir at abs if it is not yet, and reads its directory.id and what
// the last run left in it.
func openLogDir(abs string, nodeID int32, clusterID string, logger *slog.Logger) (*logDir, error) {
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir %s: %w", abs, err)
	}
	if _, err := ensureMetaProperties(abs, nodeID, clusterID); err != nil {
		return nil, err
	}
	id, err := readDirectoryID(abs)
	if err != nil {
		return nil, err
	}
	ld := &logDir{path: abs, id: id}
	if ld.startup, err = readStartupState(abs, logger); err != nil {
		return nil, err
	}
	if _, err := os.ReadDir(abs); err != nil {
		return nil, fmt.Errorf("list log dir %s: %w", abs, err)
	}
	return ld, nil
}

// containsDir reports whether dirs has the dir at path.
func containsDir(dirs []*logDir, path string) bool {
	for _, d := range dirs {
		if d.path == path {
			return true
		}
	}
	return false
}

// readStartupState reads dir's clean-shutdown marker and checkpoints. A damaged checkpoint is
// reported and ignored: recovery then scans the logs in full, high watermarks start at the log
// start and DeleteRecords'd records may reappear until the next DeleteRecords.
func readStartupState(dir string, logger *slog.Logger) (startupState, error) {
	clean, err := rlog.HasCleanShutdownMarker(dir)
	if err != nil {
		return startupState{}, err
	}
	read := func(name, what string) map[rlog.TopicPartition]int64 {
		m, err := rlog.ReadOffsetCheckpoint(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Warn("checkpoint unreadable; "+what, "dir", dir, "file", name, "err", err)
			return nil
		}
		return m
	}
	return startupState{clean: clean,
		recoveryPoints: read(rlog.RecoveryPointFile, "recovering its logs in full"),
		highWatermarks: read(highWatermarkFile, "high watermarks start at the log start"),
		logStarts:      read(rlog.LogStartOffsetFile, "logs start at their first segment"),
	}, nil
}

// futureLog is the copy of a move a restart interrupted: the partition directory name part,
// copied into dir at path.
type futureLog struct {
	dir        *logDir
	path, part string
}

// finishMoves handles the directories moves left: a future dir whose partition has no current
// dir in any log dir is the finished copy of a move that crashed between replacing the old log
// and renaming the copy (Kafka's order), and becomes the partition's dir; any other future dir
// is the copy of a move the restart interrupted, returned to be resumed (a second one of the
// same partition is removed). Replaced and deleted logs (-delete) are passed to removeLater, so
// that a start does not wait for a large log's removal. While a dir is offline, a future dir
// whose current dir is not found may be the unfinished copy of a log in the offline dir: it is
// left as it is and its partition returned as parked, offline until every dir is back.
func finishMoves(dirs []*logDir, logger *slog.Logger, removeLater func(dir string)) ([]futureLog, map[string]bool, error) {
	current, parked := map[string]bool{}, map[string]bool{}
	anyOffline := false
	type moved struct {
		d          *logDir
		dir        string
		name, part string
	}
	var futures, deleted []moved
	for _, d := range dirs {
		if d.offline() {
			anyOffline = true
			continue
		}
		ents, err := os.ReadDir(d.path)
		if err != nil {
			return nil, nil, fmt.Errorf("list log dir %s: %w", d.path, err)
		}
		for _, e := range ents {
			switch name := e.Name(); {
			case !e.IsDir():
			case movedDirPartition(name, futureDirSuffix) != "":
				futures = append(futures, moved{d, d.path, name, movedDirPartition(name, futureDirSuffix)})
			case movedDirPartition(name, deleteDirSuffix) != "":
				deleted = append(deleted, moved{d, d.path, name, movedDirPartition(name, deleteDirSuffix)})
			default:
				current[name] = true
			}
		}
	}
	var resume []futureLog
	resumed := map[string]bool{}
	for _, f := range futures {
		from := filepath.Join(f.dir, f.name)
		switch {
		case current[f.part] && !resumed[f.part]:
			resume = append(resume, futureLog{dir: f.d, path: from, part: f.part})
			resumed[f.part] = true
		case current[f.part]:
			logger.Info("removing a second copy of an unfinished log dir move", "dir", from)
			if err := os.RemoveAll(from); err != nil {
				return nil, nil, fmt.Errorf("remove unfinished move %s: %w", from, err)
			}
		case anyOffline:
			logger.Warn("leaving the copy of a log dir move whose log may be in an offline dir", "dir", from)
			parked[f.part] = true
		default:
			to := filepath.Join(f.dir, f.part)
			logger.Info("finishing a log dir move interrupted after the old log was replaced", "from", from, "to", to)
			if err := os.Rename(from, to); err != nil {
				return nil, nil, fmt.Errorf("finish move %s: %w", from, err)
			}
			if err := fsutil.SyncDir(f.dir); err != nil {
				return nil, nil, err
			}
			current[f.part] = true
		}
	}
	for _, d := range deleted {
		removeLater(filepath.Join(d.dir, d.name))
	}
	return resume, parked, nil
}

// logDirByPath is the configured dir at path (absolute or not), nil when none is.
func (b *Broker) logDirByPath(path string) *logDir {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	for _, d := range b.dirs {
		if d.path == abs {
			return d
		}
	}
	return nil
}

// placement chooses the dir of a partition log about to be opened: the online dir that holds
// its directory, else the dir AlterReplicaLogDirs asked for, else the online dir with the
// fewest partitions, counting those about to be opened there (pending). It errors when no dir
// is online.
func (b *Broker) placement(topic string, index int32, pending map[*logDir]int32) (*logDir, error) {
	name := filepath.Base(partitionDir("", topic, index))
	var least *logDir
	for _, d := range b.dirs {
		if d.offline() {
			continue
		}
		if _, err := os.Stat(filepath.Join(d.path, name)); err == nil {
			return d, nil
		}
		if least == nil || d.parts.Load()+pending[d] < least.parts.Load()+pending[least] {
			least = d
		}
	}
	if least == nil {
		return nil, fmt.Errorf("place %s: every log dir is offline", name)
	}
	if d := b.preferredDirs.take(rlog.TopicPartition{Topic: topic, Partition: index}); d != nil && !d.offline() {
		return d, nil
	}
	return least, nil
}

// preferredDirs are the dirs AlterReplicaLogDirs named for partitions this broker does not
// hold yet, where they are created once assigned here (Kafka's preferred log dirs).
type preferredDirs struct {
	mu sync.Mutex
	m  map[rlog.TopicPartition]*logDir
}

// set records d as the dir of tp's log once it is created.
func (p *preferredDirs) set(tp rlog.TopicPartition, d *logDir) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[rlog.TopicPartition]*logDir{}
	}
	p.m[tp] = d
}

// take returns and forgets the dir recorded for tp, nil when none.
func (p *preferredDirs) take(tp rlog.TopicPartition) *logDir {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.m[tp]
	delete(p.m, tp)
	return d
}

// isStorageError reports whether err comes from the file system (a failed write, fsync,
// fallocate, rename or open) rather than from the log's own checks.
func isStorageError(err error) bool {
	var errno syscall.Errno
	var pe *fs.PathError
	var le *os.LinkError
	return errors.As(err, &errno) || errors.As(err, &pe) || errors.As(err, &le)
}

// noteStorageError takes d offline when err is an I/O error.
func (b *Broker) noteStorageError(d *logDir, err error) {
	if err != nil && isStorageError(err) {
		b.failDir(d, err)
	}
}

// failDir takes d offline after the I/O error err: its partitions answer KAFKA_STORAGE_ERROR
// from now on, their fetches waiting are woken to say so, the cleaner lets go of them, and the
// controller is told their replicas are offline (dirfailover.go).
func (b *Broker) failDir(d *logDir, err error) {
	if d == nil || !d.failure.CompareAndSwap(nil, &err) {
		return
	}
	b.logger.Error("log dir offline after an I/O error; its partitions are offline", "dir", d.path, "err", err)
	for _, ps := range b.parts.Load().byName {
		for _, p := range ps {
			if p != nil && p.dir.Load() == d {
				b.cleaner.Remove(p.log())
				p.wakeWaiters()
			}
		}
	}
	b.signalDirReport()
}

// offline reports whether p's log dir is offline.
func (p *partition) offline() bool {
	d := p.dir.Load()
	return d != nil && d.offline()
}

// writeCheckpoints writes every online dir's recovery-point, replication-offset (high
// watermark) and log-start-offset checkpoints for the partitions in it; a dir whose write
// fails goes offline.
func (b *Broker) writeCheckpoints() error {
	type cps struct{ rps, hws, starts map[rlog.TopicPartition]int64 }
	byDir := map[*logDir]*cps{}
	for _, d := range b.dirs {
		byDir[d] = &cps{map[rlog.TopicPartition]int64{}, map[rlog.TopicPartition]int64{}, map[rlog.TopicPartition]int64{}}
	}
	for _, ps := range b.parts.Load().byName {
		for _, p := range ps {
			if p == nil {
				continue
			}
			c := byDir[p.dir.Load()]
			if c == nil {
				continue
			}
			l := p.log()
			tp := rlog.TopicPartition{Topic: p.topic, Partition: p.index}
			c.rps[tp] = l.RecoveryPoint()
			c.hws[tp] = p.highWatermark()
			c.starts[tp] = l.LogStartOffset()
		}
	}
	var errs []error
	for _, d := range b.dirs {
		if d.offline() {
			continue
		}
		c := byDir[d]
		err := errors.Join(
			rlog.WriteOffsetCheckpoint(filepath.Join(d.path, rlog.RecoveryPointFile), c.rps),
			rlog.WriteOffsetCheckpoint(filepath.Join(d.path, highWatermarkFile), c.hws),
			rlog.WriteOffsetCheckpoint(filepath.Join(d.path, rlog.LogStartOffsetFile), c.starts))
		if err != nil {
			err = fmt.Errorf("checkpoint log dir %s: %w", d.path, err)
			if isStorageError(err) {
				b.failDir(d, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
