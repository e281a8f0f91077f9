package broker

// GetTelemetrySubscriptions (key 71), version 0.
//
// Behavior: KIP-714, as Kafka's ClientMetricsManager. A client sending the zero instance id is
// assigned a new one; the answer is the client's subscription: the metric name prefixes of
// the client metrics subscriptions it matches ("*" alone when one asks for every metric;
// none when it matches none), the shortest of their push intervals and Kafka's default of
// 5 minutes, a subscription id that changes with them, the compression types pushes may use
// (zstd, lz4, gzip, snappy), telemetry.max.bytes and delta temporality. Asking again within
// the push interval is THROTTLING_QUOTA_EXCEEDED, unless the last push failed with
// UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE or the subscriptions changed since
// (telemetry.go). Served only with metrics.listen set, where pushed metrics are exported, as
// Kafka serves it only with a client telemetry plugin. No ACL is checked, as in Kafka.
//
// Version notes: only v0 exists.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

var getTelemetrySubscriptionsAPI = &api{key: kmsg.GetTelemetrySubscriptions, minVersion: 0, maxVersion: 0, handle: handleGetTelemetrySubscriptions}

func handleGetTelemetrySubscriptions(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
	a := b.telemetry.subscribe(b.meta.Image(), meta.UUID(req.ClientInstanceID), rc.clientInfo())
	if a.err != nil {
		resp.ErrorCode = a.err.Code
		rc.respond(resp)
		return
	}
	resp.ClientInstanceID = a.id
	resp.SubscriptionID = a.subscriptionID
	resp.AcceptedCompressionTypes = telemetryCompressions
	resp.PushIntervalMillis = a.intervalMs
	resp.TelemetryMaxBytes = b.telemetry.maxBytes
	resp.DeltaTemporality = true
	resp.RequestedMetrics = a.metrics
	if resp.RequestedMetrics == nil {
		resp.RequestedMetrics = []string{}
	}
	rc.respond(resp)
}
