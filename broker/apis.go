package broker

import (
	"encoding/binary"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/wire"
)

// api is one Kafka API this broker serves: the versions it implements and its handler. The
// ApiVersions response is built from this table, so what is advertised is what is implemented.
type api struct {
	key        kmsg.Key
	minVersion int16
	maxVersion int16
	// advertiseFromZero lists the API from version 0 in ApiVersions although versions below
	// minVersion are refused (Produce, see 00_produce.go).
	advertiseFromZero bool
	// keepsRequest says the API's code keeps request data after answering (names stored in
	// the metadata image, group state): its requests are decoded into memory of their own.
	// Otherwise decoded requests alias the request frame, which lives until the request is
	// answered.
	keepsRequest bool
	// decode, when set, decodes the body into memory rc keeps for reuse instead of a new kmsg
	// request, so that the API's steady traffic allocates nothing (Produce).
	decode func(rc *reqCtx, body []byte) (kmsg.Request, error)
	// handle runs on a handler worker and may block; it must eventually complete rc exactly
	// once (respond, respondPieces, noResponse or closeConn), before or after it returns.
	handle func(b *Broker, rc *reqCtx, req kmsg.Request)
	// inline says handle may also run on an event loop thread that connections share
	// (io.inline.requests): it never blocks there, or hands the request off to a worker first
	// (rc.onLoop, connState.handOff).
	inline bool
}

// servedAPIs lists the broker's own APIs, in key order; each entry is defined in the file named by
// its key. The group coordinator's APIs come from groupAPIs.
func servedAPIs() []*api {
	return []*api{
		produceAPI,
		fetchAPI,
		listOffsetsAPI,
		metadataAPI,
		findCoordinatorAPI,
		saslHandshakeAPI,
		apiVersionsAPI,
		createTopicsAPI,
		deleteTopicsAPI,
		deleteRecordsAPI,
		initProducerIDAPI,
		offsetForLeaderEpochAPI,
		writeTxnMarkersAPI,
		describeACLsAPI,
		createACLsAPI,
		deleteACLsAPI,
		describeConfigsAPI,
		alterConfigsAPI,
		alterReplicaLogDirsAPI,
		describeLogDirsAPI,
		saslAuthenticateAPI,
		createPartitionsAPI,
		createDelegationTokenAPI,
		renewDelegationTokenAPI,
		expireDelegationTokenAPI,
		describeDelegationTokenAPI,
		electLeadersAPI,
		incrementalAlterConfigsAPI,
		alterPartitionReassignmentsAPI,
		listPartitionReassignmentsAPI,
		describeClientQuotasAPI,
		alterClientQuotasAPI,
		describeUserScramCredentialsAPI,
		alterUserScramCredentialsAPI,
		describeClusterAPI,
		describeQuorumAPI,
		unregisterBrokerAPI,
		updateFeaturesAPI,
		describeProducersAPI,
		getTelemetrySubscriptionsAPI,
		pushTelemetryAPI,
		listConfigResourcesAPI,
		describeTopicPartitionsAPI,
		addRaftVoterAPI,
		removeRaftVoterAPI,
	}
}

// apiTable indexes servedAPIs by key.
type apiTable [apiKeyLimit]*api

// apiKeyLimit bounds the API keys the table can hold; Kafka's keys are below 100.
const apiKeyLimit = 128

// newAPITable indexes the APIs served. Without a telemetry receiver (ringbroker's is /metrics)
// GetTelemetrySubscriptions and PushTelemetry are left out, as Kafka leaves them out of
// ApiVersions without a client telemetry plugin, so that clients do not push for nothing.
func newAPITable(telemetryReceiver bool) *apiTable {
	var t apiTable
	for _, a := range slices.Concat(servedAPIs(), groupAPIs(), txnAPIs()) {
		t[a.key] = a
	}
	if !telemetryReceiver {
		t[kmsg.GetTelemetrySubscriptions], t[kmsg.PushTelemetry] = nil, nil
	}
	return &t
}

// inlineAPI is the API of the request in frame when it may run on the event loop, else nil.
func (t *apiTable) inlineAPI(frame []byte) *api {
	if len(frame) < 2 {
		return nil
	}
	if a := t.lookup(int16(binary.BigEndian.Uint16(frame))); a != nil && a.inline {
		return a
	}
	return nil
}

// lookup returns the API for key, or nil when it is not served.
func (t *apiTable) lookup(key int16) *api {
	if key < 0 || int(key) >= len(t) {
		return nil
	}
	return t[key]
}

// apiVersionKeys is the ApiVersions key list built from the table.
func (t *apiTable) apiVersionKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for _, a := range t {
		if a == nil {
			continue
		}
		min := a.minVersion
		if a.advertiseFromZero {
			min = 0
		}
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: a.key.Int16(), MinVersion: min, MaxVersion: a.maxVersion})
	}
	return keys
}

// apiVersionsUnsupported is the framed answer to an ApiVersions request of a version we do not
// serve: UNSUPPORTED_VERSION in a v0 body with the full key list, never a closed connection.
func (t *apiTable) apiVersionsUnsupported(correlationID int32) []byte {
	return wire.AppendAPIVersionsUnsupported(nil, correlationID, t.apiVersionKeys()...)
}
