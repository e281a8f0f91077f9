package broker

// AddRaftVoter (key 80), versions 0-1.
//
// Behavior: kafka-metadata-quorum add-controller (Admin addRaftVoter) through any broker, or
// any controller with --bootstrap-controller, which forwards the request to the active
// controller over the controller listener, as Kafka's brokers forward it. The active
// controller of a dynamic quorum (controller.quorum.bootstrap.servers) promotes an observer (a learner: a controller formatted --no-initial-controllers) to voter
// once it holds the leader's log, at the endpoint of the controller listener's name among the
// request's, and answers once the change is committed (v1's AckWhenCommitted=false is answered
// the same way). Errors are Kafka's: a static quorum not upgraded (kraft.version 0) gets
// UNSUPPORTED_VERSION; a change while another is in progress or uncommitted, and a node that is
// not a controller's observer with that directory id caught up with the leader (a broker-only
// node, say), get REQUEST_TIMED_OUT; a voter DUPLICATE_VOTER; endpoints without the controller
// listener, or a negative voter id, INVALID_REQUEST; another cluster id
// INCONSISTENT_CLUSTER_ID. A principal without ALTER on the cluster gets
// CLUSTER_AUTHORIZATION_FAILED. RemoveRaftVoter (81_remove_raft_voter.go) shares the
// forwarding and the error mapping.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
	"ringbroker/raft"
)

var addRaftVoterAPI = &api{key: kmsg.AddRaftVoter, minVersion: 0, maxVersion: 1, handle: func(b *Broker, rc *reqCtx, r kmsg.Request) {
	b.handleVoterChange(rc, r, addVoter)
}}

// addVoter is AddRaftVoter as a voterChange, forwarded at v1.
var addVoter = voterChange{version: 1, doing: "adding",
	newReq:  func() kmsg.Request { return kmsg.NewPtrAddRaftVoterRequest() },
	newResp: func() kmsg.Response { return kmsg.NewPtrAddRaftVoterResponse() },
	setErr: func(resp kmsg.Response, code int16, msg *string) {
		resp.(*kmsg.AddRaftVoterResponse).ErrorCode, resp.(*kmsg.AddRaftVoterResponse).ErrorMessage = code, msg
	},
	fields: func(req kmsg.Request) (*string, int32) {
		r := req.(*kmsg.AddRaftVoterRequest)
		return r.ClusterID, r.TimeoutMillis
	},
	apply: func(b *Broker, ctx context.Context, req kmsg.Request) error {
		r := req.(*kmsg.AddRaftVoterRequest)
		addr, err := b.voterEndpoint(r.Listeners)
		if err != nil {
			return err
		}
		return b.meta.AddVoter(ctx, r.VoterID, r.VoterDirectoryID, addr)
	},
}

// voterChange is what AddRaftVoter and RemoveRaftVoter differ in.
type voterChange struct {
	// version is the version the request and response travel at to the active controller.
	version int16
	// doing names the change in the static quorum's refusal ("adding" a voter).
	doing   string
	newReq  func() kmsg.Request
	newResp func() kmsg.Response
	setErr  func(resp kmsg.Response, code int16, msg *string)
	// fields returns the request's cluster id and timeout (0: none).
	fields func(req kmsg.Request) (clusterID *string, timeoutMs int32)
	// apply makes the change on the active controller.
	apply func(b *Broker, ctx context.Context, req kmsg.Request) error
}

// voterChangeTimeout bounds a voter change whose request gives no timeout.
const voterChangeTimeout = 30 * time.Second

// handleVoterChange checks the client's authority, sends the request to the active controller
// at vc.version and answers the client with its response, or with REQUEST_TIMED_OUT when no
// controller answered.
func (b *Broker) handleVoterChange(rc *reqCtx, req kmsg.Request, vc voterChange) {
	version := req.GetVersion()
	resp := vc.newResp()
	if !rc.authorizer().mayCluster(acl.OpAlter) {
		vc.setErr(resp, kerr.ClusterAuthorizationFailed.Code, &kerr.ClusterAuthorizationFailed.Message)
	} else if err := b.forwardVoterChange(req, vc, resp); err != nil {
		b.logger.Warn("voter change", "api", kmsg.NameForKey(req.Key()), "err", err)
		resp = vc.newResp()
		msg := err.Error()
		vc.setErr(resp, kerr.RequestTimedOut.Code, &msg)
	}
	resp.SetVersion(version)
	rc.respond(resp)
}

// forwardVoterChange sends req to the active controller at vc.version and decodes its answer
// into resp.
func (b *Broker) forwardVoterChange(req kmsg.Request, vc voterChange, resp kmsg.Response) error {
	timeout := voterChangeTimeout
	if _, ms := vc.fields(req); ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req.SetVersion(vc.version)
	out, err := b.meta.ControllerAPI(ctx, req.Key(), req.AppendTo(nil))
	if err != nil {
		return err
	}
	resp.SetVersion(vc.version)
	return resp.ReadFrom(out)
}

// serveVoterChange is the active controller's side of a voter change (a
// meta.ControllerAPIHandler once bound to vc).
func (b *Broker) serveVoterChange(body []byte, vc voterChange) ([]byte, error) {
	req := vc.newReq()
	req.SetVersion(vc.version)
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(req.Key()), vc.version, err)
	}
	resp := vc.newResp()
	resp.SetVersion(vc.version)
	clusterID, _ := vc.fields(req)
	code, msg, err := b.decideVoterChange(clusterID, func(ctx context.Context) error { return vc.apply(b, ctx, req) }, vc.doing)
	if err != nil {
		return nil, err
	}
	if code != nil {
		vc.setErr(resp, code.Code, &msg)
	}
	return resp.AppendTo(nil), nil
}

// decideVoterChange runs change on the active controller and maps its refusal to Kafka's code
// and message. A raft.NotLeaderError (this node stopped leading, or handed leadership away to
// remove itself) is returned as the error, so that the request is taken to the leader.
func (b *Broker) decideVoterChange(clusterID *string, change func(context.Context) error, doing string) (*kerr.Error, string, error) {
	if clusterID != nil && *clusterID != b.meta.Image().ClusterID {
		return kerr.InconsistentClusterID, fmt.Sprintf("cluster id %s is not this cluster's %s", *clusterID, b.meta.Image().ClusterID), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), voterChangeTimeout)
	defer cancel()
	err := change(ctx)
	var nl *raft.NotLeaderError
	switch {
	case err == nil:
		return nil, "", nil
	case errors.As(err, &nl):
		return nil, "", err
	case errors.Is(err, meta.ErrStaticQuorum):
		return kerr.UnsupportedVersion, fmt.Sprintf("Cluster doesn't support %s voter because the kraft.version feature is 0", doing), nil
	case errors.Is(err, meta.ErrDuplicateVoter):
		return kerr.DuplicateVoter, err.Error(), nil
	case errors.Is(err, meta.ErrVoterNotFound):
		return kerr.VoterNotFound, err.Error(), nil
	case errors.Is(err, meta.ErrInvalidVoterChange):
		return kerr.InvalidRequest, err.Error(), nil
	case errors.Is(err, meta.ErrVoterChangeBusy), errors.Is(err, meta.ErrNotCaughtUp), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut, err.Error(), nil
	default:
		return kerr.UnknownServerError, err.Error(), nil
	}
}

// voterEndpoint is the address of the listener named as this node's controller listener
// among a new voter's endpoints: where the quorum reaches it.
func (b *Broker) voterEndpoint(ls []kmsg.AddRaftVoterRequestListener) (string, error) {
	name := b.controllerListenerName()
	for _, l := range ls {
		if l.Name == name {
			return net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))), nil
		}
	}
	return "", fmt.Errorf("the endpoints %v do not contain a listener for %s: %w", ls, name, meta.ErrInvalidVoterChange)
}
