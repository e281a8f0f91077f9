package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

// This file is the authorization of the transaction coordinator's APIs, on the broker side
// before a request reaches the coordinator, as Kafka 4.1's KafkaApis does it before it calls
// its TransactionCoordinator. InitProducerId is authorized in 22_init_producer_id.go.

// gateTxnRequest authorizes a request of the transaction coordinator's APIs; im answers
// whether the partitions an AddPartitionsToTxn names exist.
func gateTxnRequest(z requestAuthz, im *meta.Image, req kmsg.Request) coordGate {
	switch req := req.(type) {
	case *kmsg.AddPartitionsToTxnRequest:
		if req.Version >= 4 {
			// Sent by partition leaders (KIP-890), never by clients.
			if !z.mayCluster(acl.OpClusterAction) {
				resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
				resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				return answerGate(resp)
			}
			return passGate(req)
		}
		return gateAddPartitionsToTxn(z, im, req)
	case *kmsg.AddOffsetsToTxnRequest:
		code := (*kerr.Error)(nil)
		switch {
		case !z.may(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
			code = kerr.TransactionalIDAuthorizationFailed
		case !z.may(acl.OpRead, acl.ResourceGroup, req.Group):
			code = kerr.GroupAuthorizationFailed
		}
		if code != nil {
			resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
			resp.ErrorCode = code.Code
			return answerGate(resp)
		}
	case *kmsg.EndTxnRequest:
		if !z.may(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
			resp := req.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return answerGate(resp)
		}
	case *kmsg.DescribeTransactionsRequest:
		return gateDescribeTransactions(z, req)
	case *kmsg.ListTransactionsRequest:
		if z.on() {
			return coordGate{req: req, finish: func(r kmsg.Response) {
				resp := r.(*kmsg.ListTransactionsResponse)
				kept := resp.TransactionStates[:0]
				for _, s := range resp.TransactionStates {
					if z.may(acl.OpDescribe, acl.ResourceTransactionalID, s.TransactionalID) {
						kept = append(kept, s)
					}
				}
				resp.TransactionStates = kept
			}}
		}
	}
	return passGate(req)
}

// gateAddPartitionsToTxn is a client's AddPartitionsToTxn (before v4), as Kafka's: WRITE on the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED in every partition), then WRITE on
// each topic. Internal topics are never allowed here, with or without an authorizer (Kafka
// leaves them out of what it authorizes; a producer adds __consumer_offsets with
// AddOffsetsToTxn). When a partition fails authorization or does not exist, nothing is added:
// it gets TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION, every other partition
// OPERATION_NOT_ATTEMPTED, and the coordinator is not asked.
func gateAddPartitionsToTxn(z requestAuthz, im *meta.Image, req *kmsg.AddPartitionsToTxnRequest) coordGate {
	answer := func(code func(topic string, partition int32) *kerr.Error) coordGate {
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, code(rt.Topic, p).Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return answerGate(resp)
	}
	if !z.may(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		return answer(func(string, int32) *kerr.Error { return kerr.TransactionalIDAuthorizationFailed })
	}
	writable := z.topicChecks(acl.OpWrite)
	code := func(topic string, partition int32) *kerr.Error {
		if isInternalTopic(topic) || !writable.may(topic) {
			return kerr.TopicAuthorizationFailed
		}
		if t := im.Topics[topic]; t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
			return kerr.UnknownTopicOrPartition
		}
		return nil
	}
	failed := false
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			failed = failed || code(rt.Topic, p) == kerr.TopicAuthorizationFailed
		}
	}
	if !failed {
		// Unknown partitions alone the coordinator answers the same way.
		return passGate(req)
	}
	return answer(func(topic string, partition int32) *kerr.Error {
		if c := code(topic, partition); c != nil {
			return c
		}
		return kerr.OperationNotAttempted
	})
}

// gateDescribeTransactions: DESCRIBE on each transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and in every answer only the topics the principal
// may DESCRIBE.
func gateDescribeTransactions(z requestAuthz, req *kmsg.DescribeTransactionsRequest) coordGate {
	if !z.on() {
		return passGate(req)
	}
	denied := make([]bool, len(req.TransactionalIDs))
	fwd := *req
	fwd.TransactionalIDs = nil
	for i, id := range req.TransactionalIDs {
		if denied[i] = !z.may(acl.OpDescribe, acl.ResourceTransactionalID, id); !denied[i] {
			fwd.TransactionalIDs = append(fwd.TransactionalIDs, id)
		}
	}
	merge := func(asked []kmsg.DescribeTransactionsResponseTransactionState) []kmsg.DescribeTransactionsResponseTransactionState {
		describable := z.topicChecks(acl.OpDescribe)
		out := make([]kmsg.DescribeTransactionsResponseTransactionState, 0, len(req.TransactionalIDs))
		j := 0
		for i, id := range req.TransactionalIDs {
			if denied[i] {
				s := kmsg.NewDescribeTransactionsResponseTransactionState()
				s.TransactionalID, s.ErrorCode = id, kerr.TransactionalIDAuthorizationFailed.Code
				out = append(out, s)
				continue
			}
			if j >= len(asked) {
				break
			}
			s := asked[j]
			j++
			kept := s.Topics[:0]
			for _, t := range s.Topics {
				if describable.may(t.Topic) {
					kept = append(kept, t)
				}
			}
			s.Topics = kept
			out = append(out, s)
		}
		return out
	}
	if len(fwd.TransactionalIDs) == 0 {
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		resp.TransactionStates = merge(nil)
		return answerGate(resp)
	}
	return coordGate{req: &fwd, finish: func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeTransactionsResponse)
		resp.TransactionStates = merge(resp.TransactionStates)
	}}
}
