package broker

// Deleting partitions' logs, as Kafka's LogManager.asyncDelete: a log dropped from the metadata
// is closed without flushing, its directory renamed to <topic>-<partition>.<uuid>-delete at
// once, so that the same topic can be created again and the image applied without waiting, and
// the renamed directory removed in the background. Removing a large log takes seconds (ext4
// frees and discards its blocks in unlink); done on the goroutine applying the metadata, it
// held up DeleteTopics and every metadata change after it. A start queues the -delete
// directories a previous run left (finishMoves).

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"ringbroker/internal/fsutil"
)

// deletePartitionLogs closes the logs of partitions dropped from the metadata, renames their
// directories out of the way and queues them for removal. A directory that cannot be renamed
// is removed under its own name at once: queued, it could be removed after a topic created
// again had opened a new log there.
func (b *Broker) deletePartitionLogs(ps []*partition) {
	parents := map[string]bool{}
	for _, p := range ps {
		l := p.log()
		l.Discard()
		dir, parent := l.Dir(), filepath.Dir(l.Dir())
		deleted := filepath.Join(parent, movedDirName(dir, deleteDirSuffix))
		if err := os.Rename(dir, deleted); err != nil {
			b.logger.Warn("rename the log of a deleted partition; removing it in place", "topic", p.topic, "partition", p.index, "err", err)
			if err := os.RemoveAll(dir); err != nil {
				b.logger.Warn("remove the log of a deleted partition", "topic", p.topic, "partition", p.index, "err", err)
			}
			continue
		}
		parents[parent] = true
		b.dirRemover.add(deleted)
	}
	// One sync per log dir makes the renames durable, so that a crash does not bring a
	// deleted partition's directory back under its name with no topic to own it.
	for parent := range parents {
		if err := fsutil.SyncDir(parent); err != nil {
			b.logger.Warn("sync a log dir after renaming deleted partitions", "dir", parent, "err", err)
		}
	}
}

// setAside renames dir, a partition directory no log of this broker uses, to a -delete name,
// makes the rename durable and queues it for removal, so that whoever opens a log in its place
// does not wait for a large log's removal. A directory that cannot be renamed is removed at
// once.
func (b *Broker) setAside(dir string) error {
	deleted := filepath.Join(filepath.Dir(dir), movedDirName(dir, deleteDirSuffix))
	if err := os.Rename(dir, deleted); err != nil {
		b.logger.Warn("rename a partition directory to remove it; removing it in place", "dir", dir, "err", err)
		return os.RemoveAll(dir)
	}
	if err := fsutil.SyncDir(filepath.Dir(dir)); err != nil {
		b.logger.Warn("sync a log dir after renaming a partition directory", "dir", filepath.Dir(dir), "err", err)
	}
	b.dirRemover.add(deleted)
	return nil
}

// dirRemover removes directories in the background, one at a time, in the order queued.
type dirRemover struct {
	logger *slog.Logger
	mu     sync.Mutex
	queue  []string
	wake   chan struct{} // capacity 1: a queued directory is waiting
}

func newDirRemover(logger *slog.Logger) *dirRemover {
	return &dirRemover{logger: logger, wake: make(chan struct{}, 1)}
}

// add queues dir for removal.
func (r *dirRemover) add(dir string) {
	r.mu.Lock()
	r.queue = append(r.queue, dir)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// next takes the first queued directory, "" when none is.
func (r *dirRemover) next() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return ""
	}
	dir := r.queue[0]
	r.queue[0] = ""
	r.queue = r.queue[1:]
	return dir
}

// run removes queued directories until stop is closed. It stops between files, so a shutdown
// does not wait for a large log's removal; what is left, named -delete, is queued again at the
// next start.
func (r *dirRemover) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-r.wake:
		}
		for dir := r.next(); dir != ""; dir = r.next() {
			if !r.remove(dir, stop) {
				return
			}
		}
	}
}

// remove removes dir's entries one by one, then dir, and reports false if stop closed first.
func (r *dirRemover) remove(dir string, stop <-chan struct{}) bool {
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		r.logger.Warn("list a deleted log's directory", "dir", dir, "err", err)
	}
	for _, e := range ents {
		select {
		case <-stop:
			return false
		default:
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			r.logger.Warn("remove a deleted log's file", "dir", dir, "file", e.Name(), "err", err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		r.logger.Warn("remove a deleted log's directory", "dir", dir, "err", err)
	}
	return true
}
