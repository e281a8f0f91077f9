package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/internal/testutil"
)

// TestFeatureRecords holds UpdateFeatures' checks to Kafka's FeatureControlManager: which
// updates are refused, with which message, and the records of those accepted.
func TestFeatureRecords(t *testing.T) {
	im, err := meta.EmptyImage("cid").Apply(0, []meta.Record{{Type: meta.TypeFeature, FeatureName: featureGroupVersion, FeatureLevel: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// upgraded is im once its static quorum of one voter is at kraft.version 1.
	upgraded, err := im.Apply(1, []meta.Record{{Type: meta.TypeQuorumMember, NodeID: 1, MemberAddr: "127.0.0.1:9093", DirectoryID: meta.NewUUID()}})
	if err != nil || upgraded.KRaftVersion() != 1 {
		t.Fatalf("upgrade the quorum: kraft.version %d, %v", upgraded.KRaftVersion(), err)
	}
	for _, tc := range []struct {
		name    string
		version int16
		feature string
		level   int16
		typ     int8
		allow   bool
		// onUpgraded decides against upgraded instead of im; wKRaft says the update upgrades
		// kraft.version, which no record does.
		onUpgraded, wKRaft bool
		want               string // a refusal's message, "" when accepted
	}{
		{name: "metadata.version at its level", version: 1, feature: featureMetadataVersion, level: 27, typ: upgradeOnly},
		{name: "metadata.version past 4.1-IV1", version: 1, feature: featureMetadataVersion, level: 28, typ: upgradeOnly,
			want: "Invalid update version 28 for feature metadata.version. Local controller 1 only supports versions 7-27"},
		{name: "metadata.version safe downgrade", version: 1, feature: featureMetadataVersion, level: 21, typ: safeDowngrade,
			want: "Invalid metadata.version 21. Refusing to perform the requested downgrade because it might delete metadata information."},
		{name: "metadata.version unsafe downgrade", version: 1, feature: featureMetadataVersion, level: 21, typ: unsafeDowngrade,
			want: "Invalid metadata.version 21. Unsafe metadata downgrade is not supported in this version."},
		{name: "metadata.version disabled", version: 1, feature: featureMetadataVersion, level: 0, typ: unsafeDowngrade,
			want: "Local controller 1 only supports versions 7-27"},
		{name: "unknown feature", version: 1, feature: "nosuch.version", level: 1, typ: upgradeOnly,
			want: "Invalid update version 1 for feature nosuch.version. Local controller 1 does not support this feature."},
		{name: "group.version downgrade", version: 1, feature: featureGroupVersion, level: 0, typ: safeDowngrade},
		{name: "group.version downgrade without saying so", version: 1, feature: featureGroupVersion, level: 0, typ: upgradeOnly,
			want: "Can't downgrade the version of this feature without setting the upgrade type"},
		{name: "v0 downgrade allowed", version: 0, feature: featureGroupVersion, level: 0, allow: true},
		{name: "v0 downgrade not allowed", version: 0, feature: featureGroupVersion, level: 0,
			want: "Can't downgrade the version of this feature"},
		{name: "a feature ringbroker keeps at 0", version: 1, feature: "share.version", level: 1, typ: upgradeOnly,
			want: "Invalid update version 1 for feature share.version. Local controller 1 only supports versions 0-0"},
		{name: "transaction.version downgrade to 1", version: 1, feature: featureTransactionVersion, level: 1, typ: safeDowngrade},
		{name: "unknown upgrade type", version: 1, feature: featureGroupVersion, level: 1, typ: 4, want: "Unknown upgrade type 4"},
		{name: "kraft.version at its level", version: 1, feature: featureKRaftVersion, level: 0, typ: upgradeOnly},
		{name: "kraft.version of a static quorum upgraded", version: 1, feature: featureKRaftVersion, level: 1, typ: upgradeOnly, wKRaft: true},
		{name: "kraft.version of an upgraded quorum upgraded again", version: 1, feature: featureKRaftVersion, level: 1, typ: upgradeOnly, onUpgraded: true},
		{name: "kraft.version downgrade", version: 1, feature: featureKRaftVersion, level: 0, typ: safeDowngrade, onUpgraded: true,
			want: "Invalid upgrade of kraft.version from version 1 to 0 because the new version is a downgrade"},
		{name: "kraft.version downgrade without saying so", version: 1, feature: featureKRaftVersion, level: 0, typ: upgradeOnly, onUpgraded: true,
			want: "Can't downgrade the version of this feature without setting the upgrade type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrUpdateFeaturesRequest()
			req.Version = tc.version
			u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			u.Feature, u.MaxVersionLevel, u.UpgradeType, u.AllowDowngrade = tc.feature, tc.level, tc.typ, tc.allow
			req.FeatureUpdates = append(req.FeatureUpdates, u)
			on := im
			if tc.onUpgraded {
				on = upgraded
			}
			recs, kraft, ferr := featureRecords(on, 1, req)
			if tc.want != "" {
				if ferr == nil || ferr.code != kerr.InvalidUpdateVersion || !strings.Contains(ferr.msg, tc.want) {
					t.Fatalf("refusal %+v; want INVALID_UPDATE_VERSION saying %q", ferr, tc.want)
				}
				return
			}
			if tc.wKRaft {
				if ferr != nil || len(recs) != 0 || !kraft {
					t.Fatalf("records %+v, kraft.version upgrade %v, %+v; want the upgrade and no record", recs, kraft, ferr)
				}
				return
			}
			if ferr != nil || kraft || len(recs) != 1 || recs[0].FeatureName != tc.feature || recs[0].FeatureLevel != tc.level {
				t.Fatalf("records %+v, kraft.version upgrade %v, %+v; want %s at %d", recs, kraft, ferr, tc.feature, tc.level)
			}
		})
	}
}

// TestGroupVersionTurnsKIP848Off finalizes group.version 0 through UpdateFeatures: ApiVersions
// then shows it, a KIP-848 ConsumerGroupHeartbeat gets UNSUPPORTED_VERSION, and the level
// survives a restart; back at 1 the heartbeat is served again.
func TestGroupVersionTurnsKIP848Off(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		dir := t.TempDir()
		b := startBroker(t, io, dir)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		setGroupVersion := func(b *Broker, level int16) {
			t.Helper()
			req := kmsg.NewPtrUpdateFeaturesRequest()
			u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			u.Feature, u.MaxVersionLevel, u.UpgradeType = featureGroupVersion, level, safeDowngrade
			if level == 1 {
				u.UpgradeType = upgradeOnly
			}
			req.FeatureUpdates = append(req.FeatureUpdates, u)
			resp, err := req.RequestWith(ctx, newClient(t, b))
			if err != nil || resp.ErrorCode != 0 {
				t.Fatalf("UpdateFeatures group.version=%d: %+v, %v", level, resp, err)
			}
		}
		heartbeat := func(b *Broker) int16 {
			t.Helper()
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberEpoch, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = "g", 0, 5000, []string{"t"}
			resp, err := req.RequestWith(ctx, newClient(t, b))
			if err != nil {
				t.Fatal(err)
			}
			return resp.ErrorCode
		}
		finalized := func(b *Broker) int16 {
			t.Helper()
			// A new client: kgo answers ApiVersions from its connection's handshake.
			req := kmsg.NewPtrApiVersionsRequest()
			req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
			resp, err := req.RequestWith(ctx, newClient(t, b))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range resp.FinalizedFeatures {
				if f.Name == featureGroupVersion {
					return f.MaxVersionLevel
				}
			}
			return 0
		}
		if l := finalized(b); l != 1 {
			t.Fatalf("a new broker finalizes group.version %d; want 1", l)
		}
		setGroupVersion(b, 0)
		if l, code := finalized(b), heartbeat(b); l != 0 || code != kerr.UnsupportedVersion.Code {
			t.Fatalf("group.version 0: ApiVersions says %d, ConsumerGroupHeartbeat error %d; want 0 and UNSUPPORTED_VERSION", l, code)
		}
		if err := b.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		b = startBroker(t, io, dir)
		if l := finalized(b); l != 0 {
			t.Fatalf("after a restart group.version is %d; want 0", l)
		}
		setGroupVersion(b, 1)
		testutil.WaitFor(t, 10*time.Second, func() error {
			if code := heartbeat(b); code == kerr.UnsupportedVersion.Code {
				return errors.New("ConsumerGroupHeartbeat is still UNSUPPORTED_VERSION with group.version 1")
			}
			return nil
		})
	})
}
