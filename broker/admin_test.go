package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAdminAPIs drives the admin and metadata APIs with a real client against a real broker.
func TestAdminAPIs(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "adm"); err != nil {
		t.Fatal(err)
	}

	t.Run("CreatePartitions", func(t *testing.T) {
		rs, err := adm.UpdatePartitions(ctx, 4, "adm")
		if err != nil || rs["adm"].Err != nil {
			t.Fatalf("grow to 4: %v %v", err, rs)
		}
		td, err := adm.ListTopics(ctx, "adm")
		if err != nil || len(td["adm"].Partitions) != 4 {
			t.Fatalf("metadata after growing: %v %+v", err, td["adm"])
		}
		rs, err = adm.UpdatePartitions(ctx, 3, "adm")
		if err != nil || !errorIs(rs["adm"].Err, kerr.InvalidPartitions) {
			t.Fatalf("shrink to 3: got %v %v, want INVALID_PARTITIONS", err, rs)
		}
	})

	t.Run("IncrementalAlterConfigs", func(t *testing.T) {
		describe := func() map[string]kadm.Config {
			rcs, err := adm.DescribeTopicConfigs(ctx, "adm")
			if err != nil {
				t.Fatal(err)
			}
			rc, err := rcs.On("adm", nil)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]kadm.Config{}
			for _, c := range rc.Configs {
				out[c.Key] = c
			}
			return out
		}
		if c := describe()["retention.ms"]; c.MaybeValue() != "604800000" || c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("default retention.ms: %+v", c)
		}
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}, "adm")
		if err != nil || resp[0].Err != nil {
			t.Fatalf("set retention.ms: %v %v", err, resp)
		}
		if c := describe()["retention.ms"]; c.MaybeValue() != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Fatalf("after SET: %+v", c)
		}
		resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "adm")
		if err != nil || resp[0].Err != nil {
			t.Fatalf("delete retention.ms: %v %v", err, resp)
		}
		if c := describe()["retention.ms"]; c.MaybeValue() != "604800000" {
			t.Fatalf("after DELETE: %+v", c)
		}
		resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("soon")}}, "adm")
		if err != nil || !errorIs(resp[0].Err, kerr.InvalidConfig) {
			t.Fatalf("bad value: got %v %v, want INVALID_CONFIG", err, resp)
		}
	})

	t.Run("ListOffsetsByTimestamp", func(t *testing.T) {
		p := newClient(t, b, kgo.DefaultProduceTopic("adm"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		base := time.UnixMilli(1_700_000_000_000)
		for i := 0; i < 3; i++ {
			r := &kgo.Record{Partition: 1, Value: []byte("x"), Timestamp: base.Add(time.Duration(i) * time.Second)}
			if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		offs, err := adm.ListOffsetsAfterMilli(ctx, base.Add(time.Second).UnixMilli(), "adm")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := offs.Lookup("adm", 1); o.Offset != 1 || o.Timestamp != base.Add(time.Second).UnixMilli() {
			t.Fatalf("offset for timestamp: %+v", o)
		}
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "adm"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = 1, -3
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0]; got.Offset != 2 || got.Timestamp != base.Add(2*time.Second).UnixMilli() {
			t.Fatalf("max timestamp: offset %d timestamp %d", got.Offset, got.Timestamp)
		}
	})

	t.Run("OffsetForLeaderEpoch", func(t *testing.T) {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "adm"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.CurrentLeaderEpoch = 1, 0, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.EndOffset != 3 || got.LeaderEpoch != 0 {
			t.Fatalf("epoch 0 end: %+v", got)
		}
		rt.Partitions[0].CurrentLeaderEpoch = 5
		resp, err = req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.UnknownLeaderEpoch.Code {
			t.Fatalf("future leader epoch: code %d, want UNKNOWN_LEADER_EPOCH", got)
		}
	})

	t.Run("DescribeCluster", func(t *testing.T) {
		resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || resp.ControllerID != 1 || len(resp.Brokers) != 1 || resp.ClusterID != b.meta.Image().ClusterID {
			t.Fatalf("describe cluster: %+v", resp)
		}
	})

	t.Run("InitProducerID", func(t *testing.T) {
		ids := map[int64]bool{}
		for i := 0; i < 3; i++ {
			resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
			if err != nil || resp.ErrorCode != 0 {
				t.Fatalf("init producer id: %v %+v", err, resp)
			}
			ids[resp.ProducerID] = true
		}
		if len(ids) != 3 {
			t.Fatalf("producer ids repeat: %v", ids)
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr("tx")
		req.TransactionTimeoutMillis = 60000
		// Sent to the broker directly, before any FindCoordinator created __transaction_state:
		// the broker coordinates no transactional id yet.
		raw, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp := raw.(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("transactional init: %v %+v; want NOT_COORDINATOR", err, resp)
		}
	})

	t.Run("DeleteAndRecreate", func(t *testing.T) {
		dr, err := adm.DeleteTopics(ctx, "adm")
		if err != nil || dr["adm"].Err != nil {
			t.Fatalf("delete: %v %+v", err, dr)
		}
		// Asked of the broker directly: the client may answer Metadata from its cache.
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("adm")
		mreq.Topics = append(mreq.Topics, mt)
		raw, err := cl.Broker(1).Request(ctx, mreq)
		if err != nil {
			t.Fatal(err)
		}
		if code := raw.(*kmsg.MetadataResponse).Topics[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("metadata after delete: code %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
		}
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, "adm"); err != nil {
			t.Fatal(err)
		}
		// A fresh client: the old one caches the deleted topic's four partitions.
		offs, err := kadm.NewClient(newClient(t, b)).ListEndOffsets(ctx, "adm")
		if err != nil {
			t.Fatal(err)
		}
		if len(offs["adm"]) != 2 {
			t.Fatalf("recreated topic has %d partitions listed, want 2", len(offs["adm"]))
		}
		offs.Each(func(o kadm.ListedOffset) {
			if o.Offset != 0 {
				t.Errorf("recreated topic partition %d has end offset %d", o.Partition, o.Offset)
			}
		})
	})
}

func errorIs(err error, want *kerr.Error) bool {
	ke, ok := err.(*kerr.Error)
	return ok && ke == want
}

func TestEndpointTypeError(t *testing.T) {
	for _, tc := range []struct {
		served, asked int8
		wCode         *kerr.Error
		wMsg          string
	}{
		{endpointBroker, endpointBroker, nil, ""},
		{endpointController, endpointController, nil, ""},
		{endpointBroker, endpointController, kerr.MismatchedEndpointType, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"},
		{endpointController, endpointBroker, kerr.MismatchedEndpointType, "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"},
		{endpointBroker, 0, kerr.UnsupportedEndpointType, "Unsupported endpoint type 0"},
		{endpointController, 3, kerr.UnsupportedEndpointType, "Unsupported endpoint type 3"},
		{endpointController, -1, kerr.UnsupportedEndpointType, "Unsupported endpoint type -1"},
	} {
		code, msg := endpointTypeError(tc.served, tc.asked)
		if code != tc.wCode || msg != tc.wMsg {
			t.Errorf("endpointTypeError(%d, %d) = %v, %q; want %v, %q", tc.served, tc.asked, code, msg, tc.wCode, tc.wMsg)
		}
	}
}
