package broker

// RemoveRaftVoter (key 81), version 0.
//
// Behavior: kafka-metadata-quorum remove-controller (Admin removeRaftVoter) through any broker,
// forwarded to the active controller as AddRaftVoter is (80_add_raft_voter.go). The active
// controller of a dynamic quorum makes the voter with that id and directory id an observer
// again (a learner that keeps following the log, as a removed Kafka controller keeps
// fetching) and answers once the change is committed. Removing the active controller hands
// leadership to the voter holding most of the log, which then removes it. Errors are Kafka's:
// a static quorum gets UNSUPPORTED_VERSION; a change while another is in progress or
// uncommitted REQUEST_TIMED_OUT; an id and directory id that is no voter VOTER_NOT_FOUND;
// removing the last voter, or a negative voter id, INVALID_REQUEST; another cluster id
// INCONSISTENT_CLUSTER_ID; a principal without ALTER on the cluster
// CLUSTER_AUTHORIZATION_FAILED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var removeRaftVoterAPI = &api{key: kmsg.RemoveRaftVoter, minVersion: 0, maxVersion: 0, handle: func(b *Broker, rc *reqCtx, r kmsg.Request) {
	b.handleVoterChange(rc, r, removeVoter)
}}

// removeVoter is RemoveRaftVoter as a voterChange, forwarded at v0.
var removeVoter = voterChange{version: 0, doing: "removing",
	newReq:  func() kmsg.Request { return kmsg.NewPtrRemoveRaftVoterRequest() },
	newResp: func() kmsg.Response { return kmsg.NewPtrRemoveRaftVoterResponse() },
	setErr: func(resp kmsg.Response, code int16, msg *string) {
		resp.(*kmsg.RemoveRaftVoterResponse).ErrorCode, resp.(*kmsg.RemoveRaftVoterResponse).ErrorMessage = code, msg
	},
	fields: func(req kmsg.Request) (*string, int32) { return req.(*kmsg.RemoveRaftVoterRequest).ClusterID, 0 },
	apply: func(b *Broker, ctx context.Context, req kmsg.Request) error {
		r := req.(*kmsg.RemoveRaftVoterRequest)
		return b.meta.RemoveVoter(ctx, r.VoterID, r.VoterDirectoryID)
	},
}
