package txn

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one __transaction_state record: key and value encoded exactly as Kafka encodes them
// (kmsg's TxnMetadataKey and TxnMetadataValue). A nil Value is a tombstone: the transactional id
// expired.
type Record struct {
	// Key is the transactional id's TxnMetadataKey.
	Key []byte
	// Value is its TxnMetadataValue, nil for a tombstone.
	Value []byte
}

// State is a transaction's state, numbered as in Kafka's log records.
type State = kmsg.TransactionState

// The states, as Kafka's TransactionState.
const (
	Empty             = kmsg.TransactionStateEmpty
	Ongoing           = kmsg.TransactionStateOngoing
	PrepareCommit     = kmsg.TransactionStatePrepareCommit
	PrepareAbort      = kmsg.TransactionStatePrepareAbort
	CompleteCommit    = kmsg.TransactionStateCompleteCommit
	CompleteAbort     = kmsg.TransactionStateCompleteAbort
	Dead              = kmsg.TransactionStateDead
	PrepareEpochFence = kmsg.TransactionStatePrepareEpochFence
)

// stateNames are the names DescribeTransactions and ListTransactions use, as Kafka's
// TransactionState.stateName.
var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// stateName is s's name in the admin APIs.
func stateName(s State) string {
	if int(s) < len(stateNames) && s >= 0 {
		return stateNames[s]
	}
	return fmt.Sprintf("Unknown(%d)", s)
}

// TopicPartition names one partition a transaction wrote to.
type TopicPartition struct {
	// Topic is the topic's name.
	Topic string
	// Partition is the partition's index.
	Partition int32
}

// noProducerID and noProducerEpoch are Kafka's RecordBatch.NO_PRODUCER_ID and NO_PRODUCER_EPOCH.
const (
	noProducerID    = -1
	noProducerEpoch = -1
)

// maxProducerEpoch is the highest epoch a producer id is used with: Kafka bumps to a new producer
// id once the epoch reaches Short.MAX_VALUE - 1, keeping the last value for a fencing bump.
const maxProducerEpoch = 1<<15 - 2

// epochExhausted reports whether epoch leaves no room for another bump (Kafka's
// TransactionMetadata.isEpochExhausted).
func epochExhausted(epoch int16) bool { return epoch >= maxProducerEpoch }

// metadata is one transactional id's state: what its __transaction_state record holds, plus the
// transition in flight.
type metadata struct {
	id                 string
	producerID         int64
	prevProducerID     int64
	producerEpoch      int16
	lastProducerEpoch  int16
	timeoutMs          int32
	state              State
	partitions         map[TopicPartition]struct{}
	startMs, updatedMs int64
	// clientTV is the transaction version the client uses: 2 once it ended a transaction with
	// EndTxn v5 (KIP-890 part 2: the epoch is bumped at every commit or abort).
	clientTV int16
	// nextProducerID is the producer id a transaction version 2 producer continues with once the
	// transaction being decided completes, when its epoch is exhausted; -1 otherwise.
	nextProducerID int64
	// pending is set while a record of this id is being appended: other requests then get
	// CONCURRENT_TRANSACTIONS, as Kafka's pendingState.
	pending bool
	// waiters are the requests that wait for the pending write to finish, run (in order)
	// once it has.
	waiters []func()
	// markers is set while markers of the prepared commit or abort are being written.
	markers bool
	// fenceAbort is set when the coordinator bumped the epoch to abort a transaction on its own
	// (a timeout, or an InitProducerId during one): the abort then completes without a client.
	fenceAbort bool
}

// sortedPartitions returns m's partitions in topic, partition order.
func (m *metadata) sortedPartitions() []TopicPartition {
	return slices.SortedFunc(maps.Keys(m.partitions), func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
}

// clone returns a copy of m to transform into the next state before it is written.
func (m *metadata) clone() *metadata {
	c := *m
	c.waiters = nil
	c.partitions = maps.Clone(m.partitions)
	if c.partitions == nil {
		c.partitions = make(map[TopicPartition]struct{})
	}
	return &c
}

// record encodes m as its __transaction_state record.
func (m *metadata) record() Record {
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = m.id
	v := kmsg.NewTxnMetadataValue()
	v.Version = 1
	v.ProducerID = m.producerID
	v.ProducerEpoch = m.producerEpoch
	v.TimeoutMillis = m.timeoutMs
	v.State = m.state
	v.LastUpdateTimestamp = m.updatedMs
	v.StartTimestamp = m.startMs
	v.PreviousProducerID = m.prevProducerID
	v.NextProducerID = m.nextProducerID
	v.ClientTransactionVersion = max(m.clientTV, 1)
	for _, tp := range m.sortedPartitions() {
		if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		t := kmsg.NewTxnMetadataValueTopic()
		t.Topic = tp.Topic
		t.Partitions = []int32{tp.Partition}
		v.Topics = append(v.Topics, t)
	}
	return Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

// tombstone is the record that removes id from the log once compacted.
func tombstone(id string) Record {
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = id
	return Record{Key: k.AppendTo(nil)}
}

// decodeRecord returns the transactional id of r and its metadata, nil for a tombstone.
func decodeRecord(r Record) (string, *metadata, error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(r.Key); err != nil {
		return "", nil, fmt.Errorf("decode transaction key: %w", err)
	}
	if r.Value == nil {
		return k.TransactionalID, nil, nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(r.Value); err != nil {
		return "", nil, fmt.Errorf("decode transaction %q: %w", k.TransactionalID, err)
	}
	m := &metadata{
		id: k.TransactionalID, producerID: v.ProducerID, prevProducerID: v.PreviousProducerID,
		producerEpoch: v.ProducerEpoch, lastProducerEpoch: noProducerEpoch, timeoutMs: v.TimeoutMillis,
		clientTV: v.ClientTransactionVersion, nextProducerID: v.NextProducerID,
		state: v.State, partitions: make(map[TopicPartition]struct{}),
		startMs: v.StartTimestamp, updatedMs: v.LastUpdateTimestamp,
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.partitions[TopicPartition{t.Topic, p}] = struct{}{}
		}
	}
	return m.id, m, nil
}
