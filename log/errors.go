package log

import (
	"errors"
	"fmt"
)

// Sentinel errors returned (wrapped with detail) by Log methods. Callers map them to Kafka
// error codes with errors.Is.
var (
	// ErrOffsetOutOfRange is returned by Read for an offset below the log start offset or above
	// the log end offset (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrOutOfOrderSequence is returned by Append when an idempotent producer's batch does not
	// continue its sequence (OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch is returned by Append when a producer writes with an epoch older
	// than the one the log has seen (INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
	// ErrInvalidTxnState is returned by Append when a producer with an ongoing transaction
	// writes a non-transactional batch (INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrTransactionCoordinatorFenced is returned by Append for a transaction marker whose
	// coordinator epoch is older than the producer's last marker's
	// (TRANSACTION_COORDINATOR_FENCED).
	ErrTransactionCoordinatorFenced = errors.New("transaction coordinator fenced")
	// ErrRecordTooLarge is returned by Append when one batch exceeds Config.MaxMessageBytes
	// (MESSAGE_TOO_LARGE).
	ErrRecordTooLarge = errors.New("record batch larger than max.message.bytes")
	// ErrRecordListTooLarge is returned by Append when one append exceeds Config.SegmentBytes
	// and could never fit a segment (RECORD_LIST_TOO_LARGE).
	ErrRecordListTooLarge = errors.New("append larger than segment.bytes")
	// ErrCorruptBatch is returned by Append when the input is not a sequence of well-framed
	// v2 record batches (CORRUPT_MESSAGE).
	ErrCorruptBatch = errors.New("corrupt record batch")
	// ErrPolicyViolation is returned by DeleteRecordsBefore when cleanup.policy does not
	// include delete (POLICY_VIOLATION).
	ErrPolicyViolation = errors.New("policy violation")
	// ErrOffsetOutOfOrder is returned by AppendAsFollower when a batch starts below the log end
	// offset or below the end of the batch before it (Kafka's UnexpectedAppendOffsetException
	// and OffsetsOutOfOrderException): the follower must truncate or refetch.
	ErrOffsetOutOfOrder = errors.New("offset out of order")
	// ErrTruncated is what SyncAsync answers when TruncateTo or TruncateFullyAndStartAt removed
	// the offsets it waited for: the replica lost leadership, and the unreplicated tail with it
	// (NOT_LEADER_OR_FOLLOWER).
	ErrTruncated = errors.New("offsets truncated")
	// ErrIncompleteBatch is returned by AppendAsFollower when records hold not even one whole
	// batch: what a leader sends for a partition whose next batch did not fit its response,
	// not a corruption. It wraps ErrCorruptBatch.
	ErrIncompleteBatch = fmt.Errorf("%w: no whole batch", ErrCorruptBatch)
	// ErrClosed is returned by operations on a closed or deleted log.
	ErrClosed = errors.New("log closed")
)
