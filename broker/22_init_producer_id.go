package broker

// InitProducerId (key 22), versions 0-5.
//
// Behavior: for idempotent producers (no transactional id) hands out a new producer id with epoch
// 0, as Kafka does. Ids come from blocks of producerIDBlockSize reserved in the metadata log, so
// ids never repeat across restarts. Requests with a transactional id go to the transaction
// coordinator (coord/txn/22_init_producer_id.go). Authorization, as Kafka's: WRITE on the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
// IDEMPOTENT_WRITE on the cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).
//
// Version notes: v3 adds the existing producer id and epoch (KIP-360); without a transactional id
// a new id is handed out then too, and the old id's state is simply never used again.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var initProducerIDAPI = &api{key: kmsg.InitProducerID, minVersion: 0, maxVersion: 5, keepsRequest: true, handle: handleInitProducerID}

// producerIDBlockSize is how many producer ids one metadata record reserves, as KRaft's
// ProducerIdsRecord blocks of 1000.
const producerIDBlockSize = 1000

// producerIDAllocator hands out producer ids from blocks reserved in the metadata log.
type producerIDAllocator struct {
	b    *Broker
	mu   sync.Mutex
	next int64 // next id to hand out
	end  int64 // end of the current block (exclusive)
}

// allocate returns a new producer id, reserving a new block when the current one is used up.
func (a *producerIDAllocator) allocate() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.end {
		start, err := a.reserveBlock()
		if err != nil {
			return -1, err
		}
		a.next, a.end = start, start+producerIDBlockSize
	}
	id := a.next
	a.next++
	return id, nil
}

// reserveBlock commits the next block of producer ids and returns its start. Another broker may
// reserve the same block first, from the same image: the record then no longer advances the
// end and is refused, and the reservation tries again from the image that has the other's.
func (a *producerIDAllocator) reserveBlock() (int64, error) {
	var err error
	for range producerIDReserveTries {
		a.b.controllerMu.Lock()
		start := a.b.meta.Image().NextProducerID
		_, err = a.b.meta.Commit([]meta.Record{{Type: meta.TypeProducerIDs, NextProducerID: start + producerIDBlockSize}})
		a.b.controllerMu.Unlock()
		if err == nil {
			return start, nil
		}
		if !errors.Is(err, meta.ErrProducerIDsBehind) {
			return -1, err
		}
		time.Sleep(producerIDRetryBackoff)
	}
	return -1, fmt.Errorf("reserve a producer id block: %w", err)
}

// producerIDReserveTries and producerIDRetryBackoff bound the retries of a block reservation
// that lost a race: the image with the winner's block arrives within milliseconds.
const (
	producerIDReserveTries = 50
	producerIDRetryBackoff = 10 * time.Millisecond
)

func handleInitProducerID(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.InitProducerIDRequest)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID = -1
	resp.ProducerEpoch = -1
	z := rc.authorizer()
	if req.TransactionalID != nil {
		if !z.may(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			rc.respond(resp)
			return
		}
		handleTxnRequest(b, rc, req)
		return
	}
	if !z.mayCluster(acl.OpIdempotentWrite) && !z.mayAny(acl.OpWrite, acl.ResourceTopic) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	id, err := b.producerIDs.allocate()
	if err != nil {
		b.logger.Error("allocate producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		rc.respond(resp)
		return
	}
	resp.ProducerID = id
	resp.ProducerEpoch = 0
	rc.respond(resp)
}
