package broker

// ApiVersions (key 18), versions 0-5.
//
// Behavior: lists every API and version range from the API table. A request of a version above 5
// never reaches this handler: the connection layer answers it with UNSUPPORTED_VERSION in a v0
// body so the client can retry with a version it shares with us (KIP-511). The response header is
// always v0, which wire.AppendResponse handles.
//
// Version notes: from v3 the client software name and version must match Kafka's pattern
// (INVALID_REQUEST otherwise), and the response lists the supported and finalized features
// (features.go; kafka-features describe); from v5 a client that names the cluster and node it expects gets
// REBOOTSTRAP_REQUIRED when either is not us, and INVALID_REQUEST when it names only one of them
// (KIP-1242). A valid client software name and version is kept with the connection for client
// metrics subscriptions (telemetry.go).

import (
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var apiVersionsAPI = &api{key: kmsg.ApiVersions, minVersion: 0, maxVersion: 5, handle: handleAPIVersions, inline: true}

// clientSoftwarePattern is Kafka's rule for ClientSoftwareName and ClientSoftwareVersion.
var clientSoftwarePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleAPIVersions(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.ApiVersionsRequest)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = rc.cs.apis.apiVersionKeys()
	if req.Version >= 3 {
		addFeatures(resp, b.meta.Image())
	}
	if req.Version >= 3 && (!clientSoftwarePattern.MatchString(req.ClientSoftwareName) || !clientSoftwarePattern.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	} else if req.Version >= 3 {
		// Kept for client metrics subscriptions, as Kafka keeps a valid request's client information.
		rc.cs.software.Store(&clientSoftware{strings.Clone(req.ClientSoftwareName), strings.Clone(req.ClientSoftwareVersion)})
	}
	if req.Version >= 5 && resp.ErrorCode == 0 {
		switch {
		case (req.ClusterID == nil) != (req.NodeID < 0):
			resp.ErrorCode = kerr.InvalidRequest.Code
		case req.ClusterID != nil && (*req.ClusterID != b.meta.Image().ClusterID || req.NodeID != b.cfg.NodeID):
			resp.ErrorCode = kerr.RebootstrapRequired.Code
		}
	}
	rc.respond(resp)
}
