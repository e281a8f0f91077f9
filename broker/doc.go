// Package broker assembles ringbroker: one node's configuration, its partitions and their logs,
// the connections it serves over ring, the handler workers that run their requests, and one
// file per Kafka API, named by key (00_produce.go, 01_fetch.go, ...), each declaring the
// versions it serves; ApiVersions is built from those declarations and coord's (apis.go).
//
// A request goes through conn.go and handlers.go: on the event loop a connection's stream is
// split into frames, each received into a buffer of exactly its size from the request memory
// pool (queued.max.request.bytes), and queued; the connection is pushed onto a handler worker's
// lock-free queue (num.io.threads workers, split over the loops), which decodes and runs its
// requests in order and writes each response itself, in request order; on an io_uring thread a
// request of an API that cannot block there (api.inline) runs on the loop instead, handing the
// rest of itself to a worker if it finds it would block after all. A connection stops
// reading while max.inflight.requests.per.connection responses are unwritten or the pool has
// no memory for its next frame. Fetches short of min bytes wait in the purgatory
// (purgatory.go) until an append or their deadline.
//
// Every change of cluster state is a record committed to the metadata log (broker/meta), and
// handlers read the current image without locks. As the image changes, the node opens the logs
// of the partitions it leads and loads the __consumer_offsets partitions among them into the
// group coordinator; the active controller fences brokers that stop heartbeating. Group APIs
// go to the coord package, whose records this package stores in __consumer_offsets
// (groups.go); compaction.go hands compacted topics to the log cleaner; storage.go runs
// retention and keeps the log-start-offset checkpoint.
package broker
