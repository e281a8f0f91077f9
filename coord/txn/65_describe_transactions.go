package txn

// DescribeTransactions (key 65), version 0.
//
// Behavior: as Kafka's: for each transactional id, its state, timeout, start time, producer id
// and epoch and the partitions of its transaction; NOT_COORDINATOR for an id whose
// __transaction_state partition is not led here, COORDINATOR_LOAD_IN_PROGRESS while it loads,
// TRANSACTIONAL_ID_NOT_FOUND for an id it does not hold.

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var describeTransactionsAPI = API{Key: kmsg.DescribeTransactions, MinVersion: 0, MaxVersion: 0, handle: handleDescribeTransactions}

func handleDescribeTransactions(c *Coordinator, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	resp.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, len(req.TransactionalIDs))
	if len(req.TransactionalIDs) == 0 {
		respond(resp)
		return
	}
	var left atomic.Int32
	left.Store(int32(len(req.TransactionalIDs)))
	for i, id := range req.TransactionalIDs {
		c.onShardOf(id, func(s *shard, p int32) {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID = id
			part, code := s.owned(p)
			var m *metadata
			if code == nil {
				if m = part.txns[id]; m == nil || m.state == Dead {
					code = kerr.TransactionalIDNotFound
				}
			}
			if code != nil {
				st.ErrorCode = code.Code
			} else {
				st.State = stateName(m.state)
				st.TimeoutMillis = m.timeoutMs
				st.StartTimestamp = m.startMs
				st.ProducerID, st.ProducerEpoch = m.producerID, m.producerEpoch
				for _, tp := range m.sortedPartitions() {
					if n := len(st.Topics); n > 0 && st.Topics[n-1].Topic == tp.Topic {
						st.Topics[n-1].Partitions = append(st.Topics[n-1].Partitions, tp.Partition)
						continue
					}
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
					st.Topics = append(st.Topics, t)
				}
			}
			resp.TransactionStates[i] = st
			if left.Add(-1) == 0 {
				respond(resp)
			}
		})
	}
}
