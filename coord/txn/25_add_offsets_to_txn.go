package txn

// AddOffsetsToTxn (key 25), versions 0-4.
//
// Behavior: as Kafka's: the group's __consumer_offsets partition (abs(hash(group)) %
// offsets.topic.num.partitions) joins the producer's transaction exactly as AddPartitionsToTxn
// adds a partition, so that the transaction's markers reach the offsets its TxnOffsetCommit
// wrote. Errors are AddPartitionsToTxn's, for the one partition.
//
// Version notes: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/coord"
)

var addOffsetsToTxnAPI = API{Key: kmsg.AddOffsetsToTxn, MinVersion: 0, MaxVersion: 4, handle: handleAddOffsetsToTxn}

// offsetsTopic is Kafka's internal topic of committed offsets.
const offsetsTopic = "__consumer_offsets"

func handleAddOffsetsToTxn(c *Coordinator, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tp := txnPartitions{id: req.TransactionalID, producerID: req.ProducerID, epoch: req.ProducerEpoch,
		topics: []string{offsetsTopic}, partitions: [][]int32{{coord.PartitionFor(req.Group, c.cfg.OffsetsPartitions)}}}
	c.addPartitions(tp, req.Version, func(a answer) {
		resp.ErrorCode = a[0][0]
		respond(resp)
	})
}
