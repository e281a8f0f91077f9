// Package meta holds the cluster metadata: the records that change it, the immutable image they
// build, and the Raft log that orders them (RaftStore). Every change of cluster state is a record
// appended to the metadata log and applied to a new image that replaces the old one atomically;
// readers never lock. A single node is a quorum of one voter on the same path as a cluster, with
// no controller listener: it has nobody to talk to.
//
// The files, by job:
//
//	records.go       the metadata records and their encoding
//	image.go         the image, and how records apply to it
//	raftstore.go     RaftStore: open, commit (on the leader, or forwarded to it), close
//	statemachine.go  the RaftStore as Raft's state machine: committed entries applied to the image
//	snapshot.go      snapshots of the image, which bound the Raft log
//	forward.go       the forwarding RPC to the active controller (commits, heartbeats, joins)
//	mux.go           the controller listener, shared by forwarded requests and Raft's transport
//	heartbeat.go     broker heartbeats, kept by the active controller
//	learner.go       broker-only nodes joining the log as Raft learners
//	voters.go        controller.quorum.voters
//	upgrade.go       the one-file log of a single node of older versions, upgraded on open
//	uuid.go          Kafka uuids
package meta
