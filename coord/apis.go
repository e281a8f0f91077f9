package coord

import "github.com/twmb/franz-go/pkg/kmsg"

// API is one Kafka API the coordinator serves: its key, the versions it implements and,
// unexported, its handler. Each is declared in the file named by its key (08_offset_commit.go,
// ...), whose header states the same versions; Handle dispatches on these declarations and the
// broker builds its ApiVersions entries from APIs, so what is advertised is what is served.
type API struct {
	// Key is the Kafka API key.
	Key kmsg.Key
	// MinVersion and MaxVersion bound the versions Handle accepts, from Apache Kafka 4.0's
	// minimums (KIP-896 removed OffsetCommit v0-1 and OffsetFetch v0).
	MinVersion, MaxVersion int16
	// handle serves one request of this API; it must make respond be called exactly once, from
	// a shard goroutine.
	handle func(g *GroupCoordinator, info RequestInfo, req kmsg.Request, respond func(kmsg.Response))
}

// servedAPIs lists the coordinator's APIs in key order.
func servedAPIs() []*API {
	return []*API{
		&offsetCommitAPI,
		&offsetFetchAPI,
		&joinGroupAPI,
		&heartbeatAPI,
		&leaveGroupAPI,
		&syncGroupAPI,
		&describeGroupsAPI,
		&listGroupsAPI,
		&txnOffsetCommitAPI,
		&deleteGroupsAPI,
		&offsetDeleteAPI,
		&consumerGroupHeartbeatAPI,
		&consumerGroupDescribeAPI,
	}
}

// APIs returns the Kafka APIs Handle accepts and their version ranges, in key order.
func APIs() []API {
	served := servedAPIs()
	out := make([]API, len(served))
	for i, a := range served {
		out[i] = *a
	}
	return out
}

// apiKeyLimit bounds the API keys the table can hold; Kafka's keys are below 100.
const apiKeyLimit = 128

// apiTable indexes servedAPIs by key.
type apiTable [apiKeyLimit]*API

func newAPITable() *apiTable {
	var t apiTable
	for _, a := range servedAPIs() {
		t[a.Key] = a
	}
	return &t
}

// lookup returns the API for key, or nil when the coordinator does not serve it.
func (t *apiTable) lookup(key int16) *API {
	if key < 0 || int(key) >= len(t) {
		return nil
	}
	return t[key]
}
