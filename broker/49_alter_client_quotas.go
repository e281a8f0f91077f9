package broker

// AlterClientQuotas (key 49), versions 0-1.
//
// Behavior: validates each entry as Kafka's ClientQuotaControlManager (quota.Store.Plan:
// entity types user, client-id and ip, the keys each takes, values above zero) and commits
// the changes as ClientQuota records in one batch, unless validate_only; every broker applies
// them to the quotas it enforces. Needs ALTER_CONFIGS on the cluster.
//
// Version notes: v1 is flexible.

import (
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
	"ringbroker/quota"
)

var alterClientQuotasAPI = &api{key: kmsg.AlterClientQuotas, minVersion: 0, maxVersion: 1, keepsRequest: true, handle: handleAlterClientQuotas}

func handleAlterClientQuotas(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.AlterClientQuotasRequest)
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	entity := func(parts []quota.EntityPart) []kmsg.AlterClientQuotasResponseEntryEntity {
		out := make([]kmsg.AlterClientQuotasResponseEntryEntity, 0, len(parts))
		for _, p := range parts {
			out = append(out, kmsg.AlterClientQuotasResponseEntryEntity{Type: p.Type, Name: p.Name})
		}
		return out
	}
	if !rc.allowedCluster(acl.OpAlterConfigs) {
		for _, e := range req.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			re.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			for _, p := range e.Entity {
				re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: p.Type, Name: p.Name})
			}
			resp.Entries = append(resp.Entries, re)
		}
		rc.respond(resp)
		return
	}
	alts := make([]quota.Alteration, 0, len(req.Entries))
	for _, e := range req.Entries {
		var a quota.Alteration
		for _, p := range e.Entity {
			a.Entity = append(a.Entity, quota.EntityPart{Type: p.Type, Name: p.Name})
		}
		for _, op := range e.Ops {
			a.Ops = append(a.Ops, quota.Op{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		alts = append(alts, a)
	}
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	b.clientQuotas.sync(b.meta.Image())
	results, changes := b.clientQuotas.store.Plan(alts, func(host string) bool {
		_, err := net.LookupHost(host)
		return err == nil
	})
	var commitErr error
	if len(changes) > 0 && !req.ValidateOnly {
		recs := make([]meta.Record, 0, len(changes))
		for _, c := range changes {
			rec := meta.Record{Type: meta.TypeClientQuota, QuotaKey: c.Key}
			for _, p := range c.Entity.Parts() {
				rec.QuotaEntity = append(rec.QuotaEntity, meta.QuotaEntityPart{Type: p.Type, Name: p.Name})
			}
			if !c.Remove {
				v := c.Value
				rec.QuotaValue = &v
			}
			recs = append(recs, rec)
		}
		if _, commitErr = b.meta.Commit(recs); commitErr == nil {
			b.clientQuotas.sync(b.meta.Image())
		}
	}
	for _, res := range results {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.Entity = entity(res.Entity)
		switch {
		case res.Err != nil:
			re.ErrorCode, re.ErrorMessage = res.Err.Code.Code, kmsg.StringPtr(res.Err.Message)
		case commitErr != nil:
			re.ErrorCode, re.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(fmt.Sprintf("commit client quota records: %v", commitErr))
		}
		resp.Entries = append(resp.Entries, re)
	}
	rc.respond(resp)
}
