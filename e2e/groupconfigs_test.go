package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// groupConfigKeys are the group configs Apache Kafka 4.1.1 lists for a group (GroupConfig).
var groupConfigKeys = []string{
	"consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
	"share.auto.offset.reset", "share.heartbeat.interval.ms", "share.isolation.level",
	"share.record.lock.duration.ms", "share.session.timeout.ms",
	"streams.heartbeat.interval.ms", "streams.num.standby.replicas", "streams.session.timeout.ms",
}

// TestGroupConfigsCommand sets a consumer group's session timeout and heartbeat interval with
// Apache Kafka's kafka-configs --entity-type groups, reads them back as dynamic group configs,
// lists every group config with --all, finds the group among the group config resources
// (kafka-configs without --entity-name), and deletes one again.
func TestGroupConfigsCommand(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		const group = "configured-group"
		b := tg.start(t)
		configs := func(args ...string) string {
			t.Helper()
			return runJava(t, "kafka.admin.ConfigCommand", append([]string{"--bootstrap-server", b.Addr(), "--entity-type", "groups"}, args...)...).stdout
		}
		out := configs("--entity-name", group, "--alter", "--add-config", "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000")
		if want := "Completed updating config for group " + group + "."; strings.TrimSpace(out) != want {
			t.Fatalf("kafka-configs --alter printed %q; want %q", out, want)
		}
		out = configs("--entity-name", group, "--describe")
		t.Logf("--describe:\n%s", out)
		for _, want := range []string{
			"Dynamic configs for group " + group + " are:",
			"consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000}",
			"consumer.heartbeat.interval.ms=6000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=6000}",
		} {
			if !strings.Contains(out, want) {
				t.Fatalf("kafka-configs --describe lacks %q:\n%s", want, out)
			}
		}
		all := configs("--entity-name", group, "--describe", "--all")
		t.Logf("--describe --all:\n%s", all)
		keys := regexp.MustCompile(`(?m)^\s+([a-z.]+)=`).FindAllStringSubmatch(all, -1)
		var got []string
		for _, k := range keys {
			got = append(got, k[1])
		}
		if strings.Join(got, " ") != strings.Join(groupConfigKeys, " ") {
			t.Fatalf("kafka-configs --describe --all lists %v; want Kafka's %v", got, groupConfigKeys)
		}
		if !strings.Contains(all, "share.isolation.level=read_uncommitted sensitive=false synonyms={DEFAULT_CONFIG:share.isolation.level=read_uncommitted}") {
			t.Fatalf("--all does not show share.isolation.level at its default:\n%s", all)
		}
		if listed := configs("--describe"); !strings.Contains(listed, "Dynamic configs for group "+group+" are:") {
			t.Fatalf("kafka-configs --describe without a group name does not list %s:\n%s", group, listed)
		}
		configs("--entity-name", group, "--alter", "--delete-config", "consumer.session.timeout.ms")
		if out := configs("--entity-name", group, "--describe"); strings.Contains(out, "consumer.session.timeout.ms") || !strings.Contains(out, "consumer.heartbeat.interval.ms=6000") {
			t.Fatalf("after --delete-config consumer.session.timeout.ms:\n%s", out)
		}
	})
}
