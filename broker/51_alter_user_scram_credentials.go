package broker

// AlterUserScramCredentials (key 51), version 0.
//
// Behavior: upserts SCRAM credentials from the salted passwords clients send (the broker keeps
// StoredKey and ServerKey, never a password) and deletes credentials, committed as
// ScramCredential records in one batch; new ones take effect at the next authentication.
// Errors per user as Kafka's ScramControlManager: DUPLICATE_RESOURCE for a user altered twice,
// UNSUPPORTED_SASL_MECHANISM for an unknown mechanism, UNACCEPTABLE_CREDENTIAL for an empty
// name or iterations outside 4096..16384, RESOURCE_NOT_FOUND for deleting a credential that
// does not exist. Needs ALTER on the cluster.
//
// Version notes: v0 is flexible.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/auth/sasl"
	"ringbroker/broker/meta"
)

var alterUserScramCredentialsAPI = &api{key: kmsg.AlterUserSCRAMCredentials, minVersion: 0, maxVersion: 0, keepsRequest: true, handle: handleAlterUserScramCredentials}

// metaScram is a stored SCRAM credential.
type metaScram = meta.ScramCredential

func handleAlterUserScramCredentials(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	type change struct {
		user string
		rec  *meta.Record
		code *kerr.Error
		msg  string
	}
	var order []string
	changes := map[string]*change{}
	altered := map[string]int{}
	for _, d := range req.Deletions {
		altered[d.Name]++
	}
	for _, u := range req.Upsertions {
		altered[u.Name]++
	}
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	var creds map[string]map[string]metaScram
	if sec := b.meta.Image().Security; sec != nil {
		creds = sec.Scram
	}
	note := func(user string, rec *meta.Record, code *kerr.Error, msg string) {
		if _, seen := changes[user]; seen {
			return
		}
		order = append(order, user)
		c := &change{user: user, rec: rec, code: code, msg: msg}
		switch {
		case !rc.allowedCluster(acl.OpAlter):
			c.rec, c.code, c.msg = nil, kerr.ClusterAuthorizationFailed, ""
		case altered[user] > 1:
			c.rec, c.code, c.msg = nil, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"
		case user == "":
			c.rec, c.code, c.msg = nil, kerr.UnacceptableCredential, "Username must not be empty"
		}
		changes[user] = c
	}
	for _, d := range req.Deletions {
		mech := scramMechanismName(d.Mechanism)
		switch _, has := creds[d.Name][mech]; {
		case mech == "":
			note(d.Name, nil, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case !has:
			note(d.Name, nil, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
		default:
			note(d.Name, &meta.Record{Type: meta.TypeScramCredential, ScramUser: d.Name, ScramMechanism: mech}, nil, "")
		}
	}
	for _, u := range req.Upsertions {
		mech := scramMechanismName(u.Mechanism)
		if mech == "" {
			note(u.Name, nil, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
			continue
		}
		if err := sasl.CheckScramIterations(int(u.Iterations)); err != nil {
			note(u.Name, nil, kerr.UnacceptableCredential, iterationsMessage(err))
			continue
		}
		cred, err := sasl.CredentialFromSaltedPassword(mech, u.SaltedPassword, u.Salt, int(u.Iterations))
		if err != nil {
			note(u.Name, nil, kerr.UnacceptableCredential, err.Error())
			continue
		}
		note(u.Name, &meta.Record{Type: meta.TypeScramCredential, ScramUser: u.Name, ScramMechanism: mech,
			Scram: &meta.ScramCredential{Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: u.Iterations}}, nil, "")
	}
	var recs []meta.Record
	for _, user := range order {
		if c := changes[user]; c.rec != nil {
			recs = append(recs, *c.rec)
		}
	}
	var commitErr error
	if len(recs) > 0 {
		_, commitErr = b.meta.Commit(recs)
	}
	for _, user := range order {
		c := changes[user]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		switch {
		case c.code != nil:
			res.ErrorCode = c.code.Code
			if c.msg != "" {
				res.ErrorMessage = kmsg.StringPtr(c.msg)
			}
		case commitErr != nil:
			res.ErrorCode, res.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(fmt.Sprintf("commit %d SCRAM credential records: %v", len(recs), commitErr))
		}
		resp.Results = append(resp.Results, res)
	}
	rc.respond(resp)
}

// iterationsMessage is Kafka's UNACCEPTABLE_CREDENTIAL message for iterations out of bounds.
func iterationsMessage(err error) string {
	switch {
	case errors.Is(err, sasl.ErrTooFewIterations):
		return "Too few iterations"
	case errors.Is(err, sasl.ErrTooManyIterations):
		return "Too many iterations"
	}
	return err.Error()
}
