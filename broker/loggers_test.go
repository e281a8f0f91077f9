package broker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBrokerLoggers: the broker-logger resource describes the root logger at the process's
// level and IncrementalAlterConfigs changes it live, refusing unknown loggers, unknown levels
// and the removal of the root's level with Kafka's errors.
func TestBrokerLoggers(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		b := startBroker(t, backend, t.TempDir())
		var lv slog.LevelVar
		b.SetLogLevel(&lv)
		cl := newClient(t, b)
		describe := func() string {
			req := kmsg.NewPtrDescribeConfigsRequest()
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, b.brokerResource()
			req.Resources = append(req.Resources, res)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			r := resp.Resources[0]
			if r.ErrorCode != 0 || len(r.Configs) != 1 || r.Configs[0].Name != "root" || r.Configs[0].Value == nil {
				t.Fatalf("DescribeConfigs of the broker loggers: %+v", r)
			}
			return *r.Configs[0].Value
		}
		alter := func(name string, op kmsg.IncrementalAlterConfigOp, value string) int16 {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, b.brokerResource()
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = name, op, kmsg.StringPtr(value)
			res.Configs = append(res.Configs, c)
			req.Resources = append(req.Resources, res)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Resources[0].ErrorCode
		}
		if got := describe(); got != "INFO" {
			t.Fatalf("root logger at %s; want INFO", got)
		}
		if code := alter("root", kmsg.IncrementalAlterConfigOpSet, "debug"); code != 0 {
			t.Fatalf("SET root=debug: error %d", code)
		}
		if got := describe(); got != "DEBUG" || lv.Level() != slog.LevelDebug {
			t.Fatalf("after SET root=DEBUG: described %s, the process logs at %v", got, lv.Level())
		}
		for _, c := range []struct {
			name  string
			op    kmsg.IncrementalAlterConfigOp
			value string
			want  int16
		}{
			{"kafka.server.ReplicaManager", kmsg.IncrementalAlterConfigOpSet, "DEBUG", kerr.InvalidConfig.Code},
			{"root", kmsg.IncrementalAlterConfigOpSet, "LOUD", kerr.InvalidConfig.Code},
			{"root", kmsg.IncrementalAlterConfigOpDelete, "", kerr.InvalidRequest.Code},
			{"root", kmsg.IncrementalAlterConfigOpAppend, "DEBUG", kerr.InvalidRequest.Code},
		} {
			if code := alter(c.name, c.op, c.value); code != c.want {
				t.Fatalf("%v %s=%s: error %d; want %d", c.op, c.name, c.value, code, c.want)
			}
		}
		if got := describe(); got != "DEBUG" {
			t.Fatalf("a refused change moved the root logger to %s", got)
		}
	})
}
