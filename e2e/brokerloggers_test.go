package e2e

import (
	"regexp"
	"testing"
)

// TestBrokerLoggersCommand changes the root logger's level with Apache Kafka's kafka-configs
// --entity-type broker-loggers and reads it back with --describe, then restores it.
func TestBrokerLoggersCommand(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		configs := func(args ...string) cmdResult {
			t.Helper()
			return runJava(t, "kafka.admin.ConfigCommand", append([]string{"--bootstrap-server", b.Addr(), "--entity-type", "broker-loggers", "--entity-name", "1"}, args...)...)
		}
		root := regexp.MustCompile(`(?m)\broot=(\w+)`)
		level := func() string {
			t.Helper()
			res := configs("--describe")
			m := root.FindStringSubmatch(res.stdout)
			if m == nil {
				t.Fatalf("kafka-configs --describe --entity-type broker-loggers lists no root logger:\n%s\n%s", res.stdout, tail(res.stderr, 4<<10))
			}
			return m[1]
		}
		before := level()
		configs("--alter", "--add-config", "root=DEBUG") // fails the test unless it exits 0
		if got := level(); got != "DEBUG" {
			t.Fatalf("root logger at %s after --alter root=DEBUG", got)
		}
		configs("--alter", "--add-config", "root="+before)
		if got := level(); got != before {
			t.Fatalf("root logger at %s after restoring %s", got, before)
		}
	})
}
