package meta

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The security record types, as KRaft's AccessControlEntryRecord,
// RemoveAccessControlEntryRecord, UserScramCredentialRecord, RemoveUserScramCredentialRecord
// and ClientQuotaRecord.
const (
	// TypeACL adds the ACL binding ACL under the id ACLID.
	TypeACL RecordType = "acl"
	// TypeRemoveACL removes the ACL binding with the id ACLID.
	TypeRemoveACL RecordType = "remove_acl"
	// TypeScramCredential sets (Scram) or removes (nil) the SCRAM credential of ScramUser for
	// ScramMechanism.
	TypeScramCredential RecordType = "scram_credential"
	// TypeClientQuota sets (QuotaValue) or removes (nil) the quota QuotaKey of the client quota
	// entity QuotaEntity.
	TypeClientQuota RecordType = "client_quota"
)

// ACL is one ACL binding with Kafka's wire codes: who (Principal, Host) may or may not
// (Permission) do what (Operation) to which resources (ResourceType, ResourceName,
// PatternType).
type ACL struct {
	ResourceType int8   `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  int8   `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    int8   `json:"operation"`
	Permission   int8   `json:"permission"`
}

// ScramCredential is what a broker keeps of a SCRAM password (RFC 5802): enough to check a
// client's proof and prove itself, not the password.
type ScramCredential struct {
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int32  `json:"iterations"`
}

// QuotaEntityPart is one component of a client quota entity: its type ("user", "client-id",
// "ip") and name, nil for the default entity of that type.
type QuotaEntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name,omitempty"`
}

// QuotaEntityKey is the canonical string of a quota entity, its parts sorted by type: the key
// of Security.Quotas.
func QuotaEntityKey(parts []QuotaEntityPart) string {
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b QuotaEntityPart) int { return strings.Compare(a.Type, b.Type) })
	var sb strings.Builder
	for i, p := range sorted {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(p.Type)
		if p.Name == nil {
			sb.WriteString("=<default>")
		} else {
			sb.WriteString("='")
			sb.WriteString(strings.ReplaceAll(*p.Name, "'", "''"))
			sb.WriteByte('\'')
		}
	}
	return sb.String()
}

// ClientQuota is the quotas set for one entity.
type ClientQuota struct {
	Entity []QuotaEntityPart  `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// Security is the cluster's ACLs, SCRAM credentials and client quotas. An image's Security is
// never modified once published: applying a record copies the map it changes.
type Security struct {
	// ACLs by their id.
	ACLs map[UUID]ACL `json:"acls,omitempty"`
	// Scram holds the SCRAM credentials by user, then mechanism ("SCRAM-SHA-256").
	Scram map[string]map[string]ScramCredential `json:"scram,omitempty"`
	// Quotas holds the client quotas by QuotaEntityKey.
	Quotas map[string]ClientQuota `json:"quotas,omitempty"`
}

// applySecurity returns s with record r applied; s itself is not changed.
func (s *Security) applySecurity(r Record) (*Security, error) {
	next := &Security{}
	if s != nil {
		*next = *s
	}
	switch r.Type {
	case TypeACL:
		if r.ACL == nil {
			return nil, fmt.Errorf("acl record %s without a binding", r.ACLID)
		}
		next.ACLs = maps.Clone(next.ACLs)
		if next.ACLs == nil {
			next.ACLs = map[UUID]ACL{}
		}
		next.ACLs[r.ACLID] = *r.ACL
	case TypeRemoveACL:
		if _, ok := next.ACLs[r.ACLID]; !ok {
			return nil, fmt.Errorf("remove unknown acl %s", r.ACLID)
		}
		next.ACLs = maps.Clone(next.ACLs)
		delete(next.ACLs, r.ACLID)
	case TypeScramCredential:
		if r.ScramUser == "" || r.ScramMechanism == "" {
			return nil, fmt.Errorf("scram credential record for user %q, mechanism %q", r.ScramUser, r.ScramMechanism)
		}
		next.Scram = maps.Clone(next.Scram)
		if next.Scram == nil {
			next.Scram = map[string]map[string]ScramCredential{}
		}
		creds := maps.Clone(next.Scram[r.ScramUser])
		if creds == nil {
			creds = map[string]ScramCredential{}
		}
		if r.Scram == nil {
			delete(creds, r.ScramMechanism)
		} else {
			creds[r.ScramMechanism] = *r.Scram
		}
		if len(creds) == 0 {
			delete(next.Scram, r.ScramUser)
		} else {
			next.Scram[r.ScramUser] = creds
		}
	case TypeClientQuota:
		if len(r.QuotaEntity) == 0 || r.QuotaKey == "" {
			return nil, fmt.Errorf("client quota record with entity %v, key %q", r.QuotaEntity, r.QuotaKey)
		}
		key := QuotaEntityKey(r.QuotaEntity)
		next.Quotas = maps.Clone(next.Quotas)
		if next.Quotas == nil {
			next.Quotas = map[string]ClientQuota{}
		}
		q := ClientQuota{Entity: r.QuotaEntity, Values: maps.Clone(next.Quotas[key].Values)}
		if q.Values == nil {
			q.Values = map[string]float64{}
		}
		if r.QuotaValue == nil {
			delete(q.Values, r.QuotaKey)
		} else {
			q.Values[r.QuotaKey] = *r.QuotaValue
		}
		if len(q.Values) == 0 {
			delete(next.Quotas, key)
		} else {
			next.Quotas[key] = q
		}
	default:
		return nil, fmt.Errorf("record type %s is not a security record", r.Type)
	}
	return next, nil
}
