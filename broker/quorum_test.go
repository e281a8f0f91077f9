package broker

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestClusterConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		props []string
		want  string
	}{
		{[]string{"process.roles=broker"}, "needs controller.quorum.voters"},
		{[]string{"process.roles=broker", "controller.quorum.voters=1@127.0.0.1:9093", "controller.listener.names=CONTROLLER"}, "but process.roles=broker"},
		{[]string{"process.roles=broker", "controller.quorum.voters=2@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "must not contain the controller listener"},
		{[]string{"process.roles=controller", "controller.quorum.voters=1@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "serves no clients"},
		{[]string{"process.roles=controller", "controller.quorum.voters=2@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listeners=CONTROLLER://127.0.0.1:0"}, "not in controller.quorum.voters"},
		{[]string{"controller.quorum.bootstrap.servers=127.0.0.1:9093"}, "controller.listener.names is required"},
		{[]string{"controller.quorum.bootstrap.servers=nohostport", "controller.listener.names=CONTROLLER"}, "controller.quorum.bootstrap.servers: \"nohostport\""},
		{[]string{"controller.quorum.bootstrap.servers=127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "is not formatted"},
		{[]string{"controller.quorum.voters=2@127.0.0.1:9093", "controller.listener.names=CONTROLLER"}, "not in controller.quorum.voters"},
		{[]string{"controller.quorum.voters=1@127.0.0.1:9093"}, "controller.listener.names is required"},
		{[]string{"controller.quorum.voters=1@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"},
			"maps the controller listener CONTROLLER to SASL_PLAINTEXT: ringbroker's controller listener is PLAINTEXT only"},
		{[]string{"process.roles=broker", "controller.quorum.voters=2@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}, "maps the controller listener CONTROLLER to SSL"},
		{[]string{"controller.quorum.voters=1@127.0.0.1:9093", "controller.listener.names=CONTROLLER"}, "not in listeners"},
		{[]string{"controller.quorum.voters=1@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "is not formatted"},
	} {
		cfg := DefaultConfig()
		cfg.LogDirs = []string{t.TempDir()}
		cfg.MetricsListen = ""
		var err error
		for _, p := range tc.props {
			if err = cfg.Override(p); err != nil {
				break
			}
		}
		if err == nil {
			var b *Broker
			b, err = New(cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				b.Shutdown(context.Background())
			}
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one containing %q", tc.props, err, tc.want)
		}
	}
}
