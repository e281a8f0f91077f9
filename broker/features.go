package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// featureSpec is a Kafka feature flag as ringbroker supports it: the levels it can run at, and
// the level a cluster without a finalized level (a Feature record) runs at.
type featureSpec struct {
	name      string
	min, max  int16
	bootstrap int16
}

// Feature names and levels, as Apache Kafka 4.1 names them.
const (
	featureMetadataVersion = "metadata.version"
	featureGroupVersion    = "group.version"
	// featureTransactionVersion 2 is KIP-890 part 2: an epoch bump per transaction, partitions
	// added by their leaders.
	featureTransactionVersion = "transaction.version"
	// featureKRaftVersion 1 is a dynamic quorum (KIP-853). It follows from the directory ids
	// the log recorded of the voters (meta.Image.KRaftVersion), not from Feature records: a
	// dynamic quorum is formatted with them, and UpdateFeatures upgrades a static one by
	// recording them (meta.RaftStore.UpgradeKRaftVersion).
	featureKRaftVersion = "kraft.version"
	// metadataVersionMin and metadataVersionMax are 3.3-IV3 and 4.1-IV1: the metadata
	// versions a Kafka 4.1 broker supports, which ringbroker's metadata stands in for.
	metadataVersionMin = 7
	metadataVersionMax = 27
)

// features lists the features ringbroker reports (ApiVersions) and finalizes (UpdateFeatures),
// sorted by name. group.version 1 is the KIP-848 consumer protocol, transaction.version 2
// KIP-890's transactions, kraft.version 1 a dynamic quorum; the others stay at 0 until
// ringbroker implements them: eligible leader replicas (KIP-966), share groups.
func features() []featureSpec {
	return []featureSpec{
		{name: "eligible.leader.replicas.version"},
		{name: featureGroupVersion, max: 1, bootstrap: 1},
		{name: featureKRaftVersion, max: 1},
		{name: featureMetadataVersion, min: metadataVersionMin, max: metadataVersionMax, bootstrap: metadataVersionMax},
		{name: "share.version"},
		{name: featureTransactionVersion, max: 2, bootstrap: 2},
	}
}

// featureLevel is the finalized level of feature name in im.
func featureLevel(im *meta.Image, name string) int16 {
	if name == featureKRaftVersion {
		return im.KRaftVersion()
	}
	if l, ok := im.Features[name]; ok {
		return l
	}
	for _, f := range features() {
		if f.name == name {
			return f.bootstrap
		}
	}
	return 0
}

// addFeatures fills ApiVersions (v3+) with the supported and finalized features of im.
func addFeatures(resp *kmsg.ApiVersionsResponse, im *meta.Image) {
	for _, f := range features() {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		if l := featureLevel(im, f.name); l > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, l, l
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
	resp.FinalizedFeaturesEpoch = im.FeaturesEpoch
}
