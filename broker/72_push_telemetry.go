package broker

// PushTelemetry (key 72), version 0.
//
// Behavior: KIP-714, as Kafka's ClientMetricsManager: a client instance pushes the metrics of
// its subscription as OTLP MetricsData, compressed with one of the accepted types. Refused,
// in Kafka's order: a reserved instance id or a push after a terminating one
// (INVALID_REQUEST), a push within the push interval that is not terminating, except the first
// after GetTelemetrySubscriptions (THROTTLING_QUOTA_EXCEEDED), another subscription id
// (UNKNOWN_SUBSCRIPTION_ID), an unknown compression type (UNSUPPORTED_COMPRESSION_TYPE) and
// more than telemetry.max.bytes (TELEMETRY_TOO_LARGE). Metrics that do not decompress or decode
// are INVALID_RECORD, and TELEMETRY_TOO_LARGE past telemetry.max.bytes decompressed, as Kafka's
// exporter answers them. The metrics pushed are exported on /metrics (telemetry.go). Served
// only with metrics.listen set, like GetTelemetrySubscriptions. No ACL is checked, as in Kafka.
//
// Version notes: only v0 exists.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

var pushTelemetryAPI = &api{key: kmsg.PushTelemetry, minVersion: 0, maxVersion: 0, handle: handlePushTelemetry}

func handlePushTelemetry(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.PushTelemetryRequest)
	resp := kmsg.NewPtrPushTelemetryResponse()
	code := b.telemetry.push(b.meta.Image(), pushRequest{id: meta.UUID(req.ClientInstanceID), subscriptionID: req.SubscriptionID,
		terminating: req.Terminating, compression: req.CompressionType, metrics: req.Metrics}, rc.clientInfo())
	if code != nil {
		resp.ErrorCode = code.Code
	}
	rc.respond(resp)
}
