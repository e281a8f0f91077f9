package txn

// ListTransactions (key 66), versions 0-2.
//
// Behavior: as Kafka's: the transactional ids of every __transaction_state partition led here,
// with their producer id and state name, filtered by state names (names Kafka does not know are
// returned in UnknownStateFilters and match nothing), by producer ids, from v1 by a minimum
// running time (transactions started at least DurationFilterMillis ago) and from v2 by a regular
// expression on the id. COORDINATOR_LOAD_IN_PROGRESS while any of those partitions loads.

import (
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var listTransactionsAPI = API{Key: kmsg.ListTransactions, MinVersion: 0, MaxVersion: 2, handle: handleListTransactions}

func handleListTransactions(c *Coordinator, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := make(map[string]bool)
	for _, name := range req.StateFilters {
		if slices.Contains(stateNames[:], name) {
			states[name] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		respond(resp)
		return
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if pattern, err = regexp.Compile(*req.TransactionalIDPattern); err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			respond(resp)
			return
		}
	}
	duration := int64(-1)
	if req.Version >= 1 {
		duration = req.DurationFilterMillis
	}
	include := func(m *metadata, now int64) bool {
		switch {
		case m.state == Dead:
			return false
		case len(states) > 0 && !states[stateName(m.state)]:
			return false
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, m.producerID):
			return false
		case duration >= 0 && (m.startMs < 0 || now-m.startMs < duration):
			return false
		case pattern != nil && !pattern.MatchString(m.id):
			return false
		}
		return true
	}
	var mu sync.Mutex
	left := len(c.shards)
	for _, sh := range c.shards {
		sh.push(func(s *shard) {
			now := s.nowMs()
			var found []kmsg.ListTransactionsResponseTransactionState
			loading := false
			for _, part := range s.parts {
				if !part.loaded {
					loading = true
					continue
				}
				for _, m := range part.txns {
					if include(m, now) {
						st := kmsg.NewListTransactionsResponseTransactionState()
						st.TransactionalID, st.ProducerID, st.TransactionState = m.id, m.producerID, stateName(m.state)
						found = append(found, st)
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			resp.TransactionStates = append(resp.TransactionStates, found...)
			if loading {
				resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			}
			if left--; left == 0 {
				slices.SortFunc(resp.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
					return strings.Compare(a.TransactionalID, b.TransactionalID)
				})
				respond(resp)
			}
		})
	}
}
