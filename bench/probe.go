package bench

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runProbe times a Metadata request for no topics every interval on a client of its own until
// ctx ends (see ProbeStats). The sends keep to the interval's schedule; one that took longer
// than the interval delays the next rather than overlapping it, so at most one probe is in
// flight and the probe adds no queue of its own.
func (r *runner) runProbe(ctx context.Context, interval time.Duration) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.opts.Bootstrap...))
	if err != nil {
		r.noteErr("probe client", err)
		return
	}
	defer cl.Close()
	// The first request dials and negotiates versions; it is not a round trip to time.
	if _, err := probeRequest().RequestWith(ctx, cl); err != nil {
		r.noteErr("probe", err)
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		req := probeRequest()
		sent := time.Now()
		_, err := req.RequestWith(ctx, cl)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.probe.errors.Add(1)
			r.noteErr("probe", err)
			continue
		}
		r.probe.record(r.inWindow(sent), time.Since(sent), 0)
	}
}

// probeRequest is a Metadata request for no topics (an empty list, not null, which would ask
// for all): brokers and controller only.
func probeRequest() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	return req
}
