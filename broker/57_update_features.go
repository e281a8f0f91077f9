package broker

// UpdateFeatures (key 57), versions 0-2.
//
// Behavior: finalizes feature levels (kafka-features upgrade / downgrade / disable) as Feature
// records in the metadata log, all or none: a level outside what ringbroker supports, an
// unknown feature, a downgrade without its upgrade type, and any metadata.version downgrade
// (safe or unsafe) are refused with INVALID_UPDATE_VERSION and Kafka's messages, and then no
// feature changes. Setting a feature to its current level succeeds, as in Kafka.
// kraft.version is 1 for a dynamic quorum and 0 for a static one (controller.quorum.voters),
// which it upgrades to 1, as Kafka 4.1 does: the active controller asks every voter for its
// directory id and records them all in one entry (meta.RaftStore.UpgradeKRaftVersion), after
// which add-controller and remove-controller change the voters; a voter that does not answer
// refuses it with INVALID_UPDATE_VERSION, and kraft.version is never downgraded.
// validate_only (v1+) checks without committing. group.version 0 turns the KIP-848 consumer
// protocol off: ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION.
// A principal without ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED at the top and no
// results, as Kafka's.
//
// Version notes: v0 says a downgrade with AllowDowngrade; v1 with UpgradeType (1 upgrade, 2
// safe downgrade, 3 unsafe downgrade) and adds ValidateOnly; v2 answers only the top-level
// error, which Kafka's admin client applies to every feature.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
	"ringbroker/raft"
)

var updateFeaturesAPI = &api{key: kmsg.UpdateFeatures, minVersion: 0, maxVersion: 2, keepsRequest: true, handle: handleUpdateFeatures}

// The UpdateFeatures upgrade types (v1+).
const (
	upgradeOnly     = 1
	safeDowngrade   = 2
	unsafeDowngrade = 3
)

func handleUpdateFeatures(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.UpdateFeaturesRequest)
	resp := kmsg.NewPtrUpdateFeaturesResponse()
	if !rc.authorizer().mayCluster(acl.OpAlter) {
		// As Kafka's UpdateFeaturesRequest.getErrorResponse: the top-level error, no results.
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr(rc.clusterRefusal(acl.OpAlter))
		rc.respond(resp)
		return
	}
	b.controllerMu.Lock()
	recs, kraftUpgrade, err := featureRecords(b.meta.Image(), b.cfg.NodeID, req)
	if err == nil && kraftUpgrade {
		err = b.upgradeKRaftVersion(req.ValidateOnly)
	}
	if err == nil && !req.ValidateOnly && len(recs) > 0 {
		if _, cerr := b.meta.Commit(recs); cerr != nil {
			err = &featureError{code: kerr.UnknownServerError, msg: cerr.Error()}
		}
	}
	b.controllerMu.Unlock()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = err.code.Code, &err.msg
	}
	for _, u := range req.FeatureUpdates {
		res := kmsg.NewUpdateFeaturesResponseResult()
		res.Feature, res.ErrorCode, res.ErrorMessage = u.Feature, resp.ErrorCode, resp.ErrorMessage
		resp.Results = append(resp.Results, res)
	}
	rc.respond(resp)
}

// featureError is why an UpdateFeatures request is refused.
type featureError struct {
	code *kerr.Error
	msg  string
}

// featureRecords checks req against im as Kafka's FeatureControlManager does (node is the
// deciding controller, named in messages) and returns the records of its updates, and whether
// it upgrades kraft.version from 0 to 1, which records the quorum's voters instead.
func featureRecords(im *meta.Image, node int32, req *kmsg.UpdateFeaturesRequest) ([]meta.Record, bool, *featureError) {
	specs := map[string]featureSpec{}
	for _, f := range features() {
		specs[f.name] = f
	}
	var recs []meta.Record
	kraftUpgrade := false
	for _, u := range req.FeatureUpdates {
		level := max(u.MaxVersionLevel, 0)
		typ := int8(upgradeOnly)
		if req.Version == 0 && u.AllowDowngrade {
			typ = safeDowngrade
		} else if req.Version >= 1 {
			typ = u.UpgradeType
		}
		refuse := func(format string, args ...any) *featureError {
			return &featureError{code: kerr.InvalidUpdateVersion, msg: fmt.Sprintf(format, args...)}
		}
		f, ok := specs[u.Feature]
		switch {
		case !ok:
			return nil, false, refuse("Invalid update version %d for feature %s. Local controller %d does not support this feature.", level, u.Feature, node)
		case level != 0 && (level < f.min || level > f.max), level == 0 && u.Feature == featureMetadataVersion:
			return nil, false, refuse("Invalid update version %d for feature %s. Local controller %d only supports versions %d-%d", level, u.Feature, node, f.min, f.max)
		case typ < upgradeOnly || typ > unsafeDowngrade:
			return nil, false, refuse("Unknown upgrade type %d for feature %s.", typ, u.Feature)
		}
		cur := featureLevel(im, u.Feature)
		if u.Feature == featureKRaftVersion && level != cur {
			if level < cur && typ != upgradeOnly {
				return nil, false, refuse("Invalid upgrade of %s from version %d to %d because the new version is a downgrade", u.Feature, cur, level)
			}
			if level > cur {
				kraftUpgrade = true
				continue
			}
		}
		if level < cur {
			switch {
			case typ == upgradeOnly:
				return nil, false, refuse("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
			case u.Feature == featureMetadataVersion && typ == unsafeDowngrade:
				return nil, false, refuse("Invalid metadata.version %d. Unsafe metadata downgrade is not supported in this version.", level)
			case u.Feature == featureMetadataVersion:
				return nil, false, refuse("Invalid metadata.version %d. Refusing to perform the requested downgrade because it might delete metadata information.", level)
			}
		}
		recs = append(recs, meta.Record{Type: meta.TypeFeature, FeatureName: u.Feature, FeatureLevel: level})
	}
	return recs, kraftUpgrade, nil
}

// upgradeKRaftVersion has the active controller upgrade a static quorum to kraft.version 1.
func (b *Broker) upgradeKRaftVersion(validateOnly bool) *featureError {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version, req.ValidateOnly = kraftUpgradeVersion, validateOnly
	ctx, cancel := context.WithTimeout(context.Background(), kraftUpgradeTimeout)
	defer cancel()
	out, err := b.meta.ControllerAPI(ctx, kmsg.UpdateFeatures.Int16(), req.AppendTo(nil))
	resp := kmsg.NewPtrUpdateFeaturesResponse()
	resp.Version = kraftUpgradeVersion
	if err == nil {
		err = resp.ReadFrom(out)
	}
	switch {
	case err != nil:
		return &featureError{code: kerr.UnknownServerError, msg: fmt.Sprintf("upgrade %s: %v", featureKRaftVersion, err)}
	case resp.ErrorCode != 0:
		fe := &featureError{code: kerr.UnknownServerError}
		if code, ok := kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error); ok {
			fe.code = code
		}
		if resp.ErrorMessage != nil {
			fe.msg = *resp.ErrorMessage
		}
		return fe
	}
	return nil
}

// kraftUpgradeVersion is the UpdateFeatures version the upgrade travels at to the active
// controller, which kraftUpgradeTimeout bounds.
const (
	kraftUpgradeVersion = 1
	kraftUpgradeTimeout = 10 * time.Second
)

// serveKRaftUpgrade is the active controller's side of upgradeKRaftVersion (a
// meta.ControllerAPIHandler).
func (b *Broker) serveKRaftUpgrade(body []byte) ([]byte, error) {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version = kraftUpgradeVersion
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode UpdateFeatures v%d: %w", kraftUpgradeVersion, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kraftUpgradeTimeout)
	defer cancel()
	err := b.meta.UpgradeKRaftVersion(ctx, req.ValidateOnly)
	resp := kmsg.NewPtrUpdateFeaturesResponse()
	resp.Version = kraftUpgradeVersion
	var nl *raft.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return nil, err
	case errors.Is(err, meta.ErrVoterDirectoryUnknown):
		resp.ErrorCode = kerr.InvalidUpdateVersion.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Invalid upgrade of %s to 1 because not all of the voters support it: %v", featureKRaftVersion, err))
	case errors.Is(err, meta.ErrVoterChangeBusy):
		resp.ErrorCode = kerr.InvalidUpdateVersion.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Unable to upgrade version for %s to 1 due to changing voters", featureKRaftVersion))
	case err != nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
	}
	return resp.AppendTo(nil), nil
}
