package broker

// Where each replica of this broker lives, so that a log dir that cannot be read at start does
// not get its partitions recreated empty in another dir. Kafka 4.1 knows it from the metadata
// (KIP-858: the controller records a directory id per replica, which each broker reports with
// AssignReplicasToDirs after it placed a replica). ringbroker keeps the same knowledge on the
// broker itself, in replica-log-dirs in the first log dir: the dir of the metadata log, which
// the broker cannot start without, as Kafka cannot start without its metadata.log.dir. That
// file is durable before a replica's directory is created, where KIP-858's assignment reaches
// the controller only after the broker placed (and may have written to) the replica, and it
// needs no metadata version of its own. The controller learns only what it acts on: which
// replicas are offline (dirfailover.go).
//
// A replica assigned here is then opened, at start or when assigned:
//   - in the online dir that holds its directory (found wins over the record: a move that
//     crashed before its swap left the log where it was);
//   - not at all while the copy of a move of it waits in an online dir and no current log is
//     found (finishMoves parked it: the log may be in an offline dir);
//   - else in the online dir recorded for it (its directory is gone: it starts empty there, as
//     Kafka creates a missing replica in its assigned dir);
//   - else not at all when it is recorded in a dir that is not online (offline, or a dir no
//     longer configured or formatted anew, whose id changed): the replica is offline and answers
//     KAFKA_STORAGE_ERROR, its partition is led elsewhere or nowhere;
//   - else, never placed here, it is new and goes where placement says; but with no record at
//     all (the first start of a broker upgraded from before the record) while a dir is
//     offline, new cannot be told from lost, and the replica is taken as lost, Kafka's rule
//     before KIP-858 (not new, not found in any online dir, some dir offline: it is in the
//     offline dir). Replicas taken as lost that way are recorded under LOST and come back when
//     every dir is online again.
//
// The file is Kafka's checkpoint format: a version line (0), a count line, then one line per
// replica: topic id, partition, directory id.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"ringbroker/broker/meta"
	"ringbroker/internal/fsutil"
	rlog "ringbroker/log"
)

// replicaDirsFileName is the record of each replica's log dir, in the first log dir.
const replicaDirsFileName = "replica-log-dirs"

// replicaKey names one partition of a topic by topic id, which a topic of the same name created
// later does not share.
type replicaKey struct {
	topic meta.UUID
	index int32
}

// replicaDirs is the record of the log dir of every replica of this broker (see above).
type replicaDirs struct {
	path string
	mu   sync.Mutex // serialises updates and their writes
	// dirs is the dir id of each replica, as last written (guarded by mu).
	dirs map[replicaKey]meta.UUID
	// complete says the record lists every replica ever placed here: the file existed at start,
	// or was written since by syncPartitions with every replica assigned here (guarded by mu).
	complete bool
}

// loadReplicaDirs reads the record in dir; a missing file is an empty, incomplete record.
func loadReplicaDirs(dir string) (*replicaDirs, error) {
	r := &replicaDirs{path: filepath.Join(dir, replicaDirsFileName), dirs: map[replicaKey]meta.UUID{}}
	data, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the replica log dirs: %w", err)
	}
	lines, err := rlog.CheckpointLines(data, 3)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.path, err)
	}
	for i, f := range lines {
		topic, err := meta.ParseUUID(f[0])
		if err != nil {
			return nil, fmt.Errorf("%s entry %d: %w", r.path, i, err)
		}
		index, err := strconv.ParseInt(f[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s entry %d: partition %q: %w", r.path, i, f[1], err)
		}
		dir, err := meta.ParseUUID(f[2])
		if err != nil {
			return nil, fmt.Errorf("%s entry %d: %w", r.path, i, err)
		}
		r.dirs[replicaKey{topic, int32(index)}] = dir
	}
	r.complete = true
	return r, nil
}

// lookup is the dir recorded for k, and whether the record is complete.
func (r *replicaDirs) lookup(k replicaKey) (dir meta.UUID, ok, complete bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	dir, ok = r.dirs[k]
	return dir, ok, r.complete
}

// update records set and forgets del, and writes the record when that changed it; once it
// returns nil the change is durable. complete says the record now lists every replica assigned
// here.
func (r *replicaDirs) update(set map[replicaKey]meta.UUID, del []replicaKey, complete bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := maps.Clone(r.dirs)
	for _, k := range del {
		delete(next, k)
	}
	maps.Copy(next, set)
	if maps.Equal(next, r.dirs) && (r.complete || !complete) {
		return nil
	}
	keys := slices.SortedFunc(maps.Keys(next), func(a, b replicaKey) int {
		if c := compareUUIDs(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.index) - int(b.index)
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d %s\n", k.topic, k.index, next[k])
	}
	if err := fsutil.WriteFileAtomic(r.path, b.Bytes()); err != nil {
		return fmt.Errorf("write the replica log dirs: %w", err)
	}
	r.dirs = next
	r.complete = r.complete || complete
	return nil
}

// replicaHome decides where the replica of partition index of t, which this broker does not
// have open, is opened (see the rules above): its dir, or nil when it is offline. pending counts
// the replicas decided for each dir and not opened yet, for placement.
func (b *Broker) replicaHome(t *meta.Topic, index int32, pending map[*logDir]int32) (*logDir, error) {
	name := filepath.Base(partitionDir("", t.Name, index))
	anyOffline := false
	for _, d := range b.dirs {
		if d.offline() {
			anyOffline = true
			continue
		}
		if _, err := os.Stat(filepath.Join(d.path, name)); err == nil {
			return d, nil
		}
	}
	if b.parkedMoves[name] {
		return nil, nil
	}
	rec, ok, complete := b.replicaDirs.lookup(replicaKey{t.ID, index})
	switch {
	case ok && rec == lostDirID && anyOffline:
		return nil, nil
	case ok && rec != lostDirID:
		if d := b.logDirByID(rec); d != nil && !d.offline() {
			return d, nil
		}
		return nil, nil
	case !ok && !complete && anyOffline:
		return nil, nil
	}
	return b.placement(t.Name, index, pending)
}

// logDirByID is the configured dir of directory id id, nil when none is.
func (b *Broker) logDirByID(id meta.UUID) *logDir {
	for _, d := range b.dirs {
		if d.id == id && !id.IsZero() {
			return d
		}
	}
	return nil
}
