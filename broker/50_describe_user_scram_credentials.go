package broker

// DescribeUserScramCredentials (key 50), version 0.
//
// Behavior: lists the SCRAM mechanisms and iteration counts each user has credentials for
// (never the credentials), all users when the request names none (a null or an empty list:
// the Java Admin client, so kafka-configs --describe --entity-type users, sends an empty one).
// A user named twice gets one result, DUPLICATE_RESOURCE, one without credentials
// RESOURCE_NOT_FOUND, with the messages of Kafka's ScramImage.describe. Needs DESCRIBE on the
// cluster (CLUSTER_AUTHORIZATION_FAILED).
//
// Version notes: v0 is flexible.

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/auth/sasl"
)

var describeUserScramCredentialsAPI = &api{key: kmsg.DescribeUserSCRAMCredentials, minVersion: 0, maxVersion: 0, handle: handleDescribeUserScramCredentials}

// scramMechanisms are the ScramMechanism codes of Kafka's SCRAM APIs, by name.
var scramMechanisms = map[string]int8{sasl.MechanismScramSHA256: 1, sasl.MechanismScramSHA512: 2}

// scramMechanismName is the name of a ScramMechanism code; "" for an unknown one.
func scramMechanismName(code int8) string {
	for name, c := range scramMechanisms {
		if c == code {
			return name
		}
	}
	return ""
}

func handleDescribeUserScramCredentials(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	// Kafka sends empty messages, not null ones, where nothing failed.
	resp.ErrorMessage = kmsg.StringPtr("")
	if !rc.allowedCluster(acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	var creds map[string]map[string]metaScram
	if sec := b.meta.Image().Security; sec != nil {
		creds = sec.Scram
	}
	// users are the distinct users asked for, in request order; count says how often each was.
	var users []string
	count := map[string]int{}
	for _, u := range req.Users {
		if count[u.Name] == 0 {
			users = append(users, u.Name)
		}
		count[u.Name]++
	}
	if len(req.Users) == 0 {
		users = slices.Sorted(maps.Keys(creds))
	}
	for _, u := range users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u
		switch {
		case count[u] > 1:
			res.ErrorCode, res.ErrorMessage = kerr.DuplicateResource.Code, kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: "+u)
		case len(creds[u]) == 0:
			res.ErrorCode, res.ErrorMessage = kerr.ResourceNotFound.Code, kmsg.StringPtr("Attempt to describe a user credential that does not exist: "+u)
		default:
			res.ErrorMessage = kmsg.StringPtr("")
			for _, mech := range slices.Sorted(maps.Keys(creds[u])) {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = scramMechanisms[mech], creds[u][mech].Iterations
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	rc.respond(resp)
}
