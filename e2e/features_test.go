package e2e

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestFeatureTool runs Apache Kafka's kafka-features (FeatureCommand): describe lists the
// features Kafka 4.1 lists, with metadata.version supported from 3.3-IV3 to 4.1-IV1 and
// finalized at 4.1-IV1, and group.version (the KIP-848 consumer protocol) at 1 of 0-1; a
// metadata.version upgrade to the current level succeeds, a downgrade and an upgrade past
// 4.1-IV1 are refused with Kafka's messages; group.version goes down to 0 and back to 1, with
// the features epoch growing.
func TestFeatureTool(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		features := func(args ...string) (string, error) {
			cmd := exec.Command("java", javaArgs(t, nil, "org.apache.kafka.tools.FeatureCommand",
				append([]string{"--bootstrap-server", b.Addr()}, args...)...)...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		describe := func() map[string]string {
			t.Helper()
			out := runJava(t, "org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", b.Addr(), "describe").stdout
			lines := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.SplitN(l, "\t", 2)
				if len(f) != 2 || !strings.HasPrefix(f[0], "Feature: ") {
					t.Fatalf("describe printed %q; want Feature: <name>\\t...:\n%s", l, out)
				}
				lines[strings.TrimPrefix(f[0], "Feature: ")] = f[1]
			}
			return lines
		}
		epochOf := regexp.MustCompile(`\tEpoch: (\d+)$`)
		withoutEpoch := func(s string) string { return epochOf.ReplaceAllString(s, "") }
		d := describe()
		for _, name := range []string{"eligible.leader.replicas.version", "group.version", "kraft.version", "metadata.version", "share.version", "transaction.version"} {
			if _, ok := d[name]; !ok {
				t.Fatalf("describe lacks %s: %v", name, d)
			}
		}
		if got, want := withoutEpoch(d["metadata.version"]), "SupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.1-IV1\tFinalizedVersionLevel: 4.1-IV1"; got != want {
			t.Fatalf("metadata.version: %q; want %q", got, want)
		}
		if got, want := withoutEpoch(d["group.version"]), "SupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1"; got != want {
			t.Fatalf("group.version: %q; want %q", got, want)
		}
		epoch := epochOf.FindStringSubmatch(d["group.version"])[1]

		if out, err := features("upgrade", "--metadata", "4.1-IV1"); err != nil || !strings.Contains(out, "metadata.version was upgraded to 27.") {
			t.Fatalf("upgrade to the current metadata.version: %v\n%s", err, out)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"downgrade", "--metadata", "3.9-IV0"}, "Invalid metadata.version 21. Refusing to perform the requested downgrade because it might delete metadata information."},
			{[]string{"downgrade", "--unsafe", "--metadata", "3.9-IV0"}, "Invalid metadata.version 21. Unsafe metadata downgrade is not supported in this version."},
			{[]string{"upgrade", "--metadata", "4.2-IV0"}, "Invalid update version 28 for feature metadata.version. Local controller 1 only supports versions 7-27"},
			{[]string{"upgrade", "--feature", "nosuch.version=1"}, "Invalid update version 1 for feature nosuch.version. Local controller 1 does not support this feature."},
		} {
			if out, err := features(tc.args...); err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("%v: exit %v; want a failure saying %q:\n%s", tc.args, err, tc.want, out)
			}
		}
		for _, level := range []string{"0", "1"} {
			out, err := features("downgrade", "--feature", "group.version="+level)
			if level == "1" {
				out, err = features("upgrade", "--feature", "group.version="+level)
			}
			if err != nil {
				t.Fatalf("group.version to %s: %v\n%s", level, err, out)
			}
			if got := describe()["group.version"]; !strings.Contains(got, "FinalizedVersionLevel: "+level+"\t") {
				t.Fatalf("after setting group.version to %s, describe shows %q", level, got)
			}
		}
		if now := epochOf.FindStringSubmatch(describe()["group.version"])[1]; len(now) < len(epoch) || len(now) == len(epoch) && now <= epoch {
			t.Fatalf("features epoch went from %s to %s over three updates", epoch, now)
		}
	})
}
