package meta

// Store is the metadata log as the broker uses it: the current image, and Commit, which appends
// records and returns an image that includes them. Log (a single voter, one file) and RaftStore
// (a Raft quorum of controllers) implement it, so the broker's metadata path is the same on
// one node and in a cluster.
type Store interface {
	// Image returns the current image; never nil.
	Image() *Image
	// Commit appends recs as one unit. Records that do not apply to the image are refused.
	Commit(recs []Record) (*Image, error)
	// Close releases the log; Commit fails afterwards.
	Close() error
}

var (
	_ Store = (*Log)(nil)
	_ Store = (*RaftStore)(nil)
)
