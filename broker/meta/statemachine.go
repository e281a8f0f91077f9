package meta

import (
	"fmt"

	"ringbroker/raft"
)

// entryData is the data of a metadata entry: the id of the request that proposed it, which
// tells the proposer the outcome of applying it, then the encoded records.
func entryData(id UUID, payload []byte) []byte {
	data := make([]byte, 0, len(id)+len(payload))
	return append(append(data, id[:]...), payload...)
}

// stateMachine is the RaftStore as Raft's StateMachine.
type stateMachine RaftStore

// Apply applies one entry: a request id, then the records. Records that do not apply to the
// image (two controllers raced to create one topic) leave it unchanged on every node alike;
// the proposer learns why.
func (sm *stateMachine) Apply(e raft.Entry) error {
	s := (*RaftStore)(sm)
	var aerr error
	var id UUID
	var w *waiter
	if len(e.Data) < len(id) {
		aerr = fmt.Errorf("metadata entry %d: %d bytes, shorter than its request id", e.Index, len(e.Data))
	} else {
		copy(id[:], e.Data)
		s.mu.Lock()
		w = s.waiters[id]
		s.mu.Unlock()
		aerr = s.applyRecords(e, w)
	}
	if aerr != nil {
		s.logger.Warn("metadata entry not applied", "index", e.Index, "err", aerr)
	}
	if w != nil {
		w.done <- aerr
	}
	s.setApplied(e.Index)
	return nil
}

// applyRecords applies the records of entry e and publishes the image they make. For a local
// proposal w whose image is still current, that image was already made.
func (s *RaftStore) applyRecords(e raft.Entry, w *waiter) error {
	im := s.Image()
	if w != nil && w.base == im {
		w.next.Offset = int64(e.Index)
		s.publish(w.next)
		return nil
	}
	recs, err := DecodeRecords(e.Data[len(UUID{}):])
	if err != nil {
		return err
	}
	next, err := im.Apply(int64(e.Index), recs)
	if err != nil {
		return err
	}
	s.publish(next)
	return nil
}
