package raft

import "fmt"

// progressState is how the leader currently replicates to one follower.
type progressState uint8

const (
	// probeState: one append at a time until the follower's match is found.
	probeState progressState = iota
	// replicateState: appends are pipelined, Next advanced optimistically.
	replicateState
	// snapshotState: a snapshot is in flight; nothing else is sent.
	snapshotState
)

func (s progressState) String() string {
	switch s {
	case probeState:
		return "StateProbe"
	case replicateState:
		return "StateReplicate"
	case snapshotState:
		return "StateSnapshot"
	}
	return fmt.Sprintf("progressState(%d)", uint8(s))
}

// progress is the leader's view of one follower (or of itself).
type progress struct {
	// match is the highest index known to be replicated; match < next.
	match, next uint64
	state       progressState
	// probeSent pauses a probing follower until it answers or a heartbeat round passes.
	probeSent bool
	// pendingSnapshot is the snapshot index sent in snapshotState.
	pendingSnapshot uint64
	// snapshotTicks counts ticks in snapshotState; a lost snapshot is resent after a timeout.
	snapshotTicks int
	// recentActive is set by any message from the follower and cleared by check-quorum.
	recentActive bool
	inflights    inflights
}

func (pr *progress) String() string {
	return fmt.Sprintf("%s match=%d next=%d", pr.state, pr.match, pr.next)
}

func (pr *progress) becomeProbe() {
	if pr.state == snapshotState {
		pr.next = max(pr.match+1, pr.pendingSnapshot+1)
	} else {
		pr.next = pr.match + 1
	}
	pr.state, pr.probeSent, pr.pendingSnapshot, pr.snapshotTicks = probeState, false, 0, 0
	pr.inflights.reset()
}

func (pr *progress) becomeReplicate() {
	pr.next = pr.match + 1
	pr.state, pr.probeSent, pr.pendingSnapshot, pr.snapshotTicks = replicateState, false, 0, 0
	pr.inflights.reset()
}

func (pr *progress) becomeSnapshot(index uint64) {
	pr.state, pr.probeSent, pr.pendingSnapshot, pr.snapshotTicks = snapshotState, false, index, 0
	pr.inflights.reset()
}

// maybeUpdate records that the follower holds the leader's log up to n.
func (pr *progress) maybeUpdate(n uint64) bool {
	updated := n > pr.match
	if updated {
		pr.match = n
		pr.probeSent = false
	}
	pr.next = max(pr.next, n+1)
	return updated
}

// maybeDecrTo handles a rejection of the append after index rejected; hint is the follower's
// guess of where the logs may match. It returns false for a stale rejection.
func (pr *progress) maybeDecrTo(rejected, hint uint64) bool {
	if pr.state == replicateState {
		if rejected <= pr.match {
			return false
		}
		pr.next = pr.match + 1
		return true
	}
	if pr.next-1 != rejected {
		return false
	}
	pr.next = max(min(rejected, hint+1), pr.match+1, 1)
	pr.probeSent = false
	return true
}

func (pr *progress) isPaused() bool {
	switch pr.state {
	case probeState:
		return pr.probeSent
	case replicateState:
		return pr.inflights.full()
	}
	return true
}

// inflights is a ring of the last indexes of appends sent but not yet acknowledged.
type inflights struct {
	start, count int
	buf          []uint64 // len(buf) is the limit, MaxInflightMsgs
}

func newInflights(size int) inflights { return inflights{buf: make([]uint64, size)} }

func (in *inflights) full() bool { return in.count == len(in.buf) }

func (in *inflights) add(last uint64) {
	if in.full() {
		panic(fmt.Sprintf("raft: inflights full (%d); an append was sent to a paused follower", in.count))
	}
	in.buf[(in.start+in.count)%len(in.buf)] = last
	in.count++
}

// freeLE releases every append whose last index is at most to.
func (in *inflights) freeLE(to uint64) {
	for in.count > 0 && in.buf[in.start] <= to {
		in.start = (in.start + 1) % len(in.buf)
		in.count--
	}
}

func (in *inflights) freeFirstOne() {
	if in.count > 0 {
		in.start = (in.start + 1) % len(in.buf)
		in.count--
	}
}

func (in *inflights) reset() { in.start, in.count = 0, 0 }
