package broker

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"ringbroker/internal/brokertest"
)

// kafkaConfigRow is one line of a testdata file of Kafka's config keys: name, type, default
// ("null" for none, `""` for the empty string) and, for broker keys, the update mode.
type kafkaConfigRow struct {
	name, kind, dflt, mode string
}

// readKafkaConfigs reads a testdata file of Kafka's config keys, skipping # comments.
func readKafkaConfigs(t *testing.T, path string) []kafkaConfigRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []kafkaConfigRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 3 {
			t.Fatalf("%s: bad line %q", path, line)
		}
		r := kafkaConfigRow{name: f[0], kind: f[1], dflt: f[2]}
		if len(f) > 3 {
			r.mode = f[3]
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// rowNames lists the names of rows.
func rowNames(rows []kafkaConfigRow) []string {
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.name
	}
	return names
}

// ringbrokerDefaults are the Kafka keys ringbroker acts on whose default differs from Kafka's,
// and why.
var ringbrokerDefaults = map[string]string{
	"node.id":                     "a node runs without any config file, as node 1 (Kafka requires node.id)",
	"broker.id":                   "broker.id is node.id",
	"log.dir":                     "log.dir is log.dirs, ./data by default (Kafka's /tmp/kafka-logs is not used)",
	"log.dirs":                    "a node runs without any config file, with its data in ./data",
	"listeners":                   "a node listens on loopback only unless told otherwise",
	"queued.max.request.bytes":    "ringbroker bounds the memory of queued requests (256 MiB) instead of their count (queued.max.requests)",
	"socket.send.buffer.bytes":    "4 MiB, so a consumer's fetch response is handed to the kernel whole (BENCHMARKS.md)",
	"socket.receive.buffer.bytes": "the kernel's autotuning (-1), which grows the window for producers' large batches",
}

// TestKafkaBrokerKeys checks kafkaBrokerKeys against Kafka 4.1.1's own list of broker keys
// (testdata), key for key: type, default and update mode; and that every Kafka key ringbroker
// acts on has Kafka's type and, but for ringbrokerDefaults, Kafka's default.
func TestKafkaBrokerKeys(t *testing.T) {
	rows := readKafkaConfigs(t, "testdata/kafka-4.1.1-broker-configs.tsv")
	want := rowNames(rows)
	var got []string
	for _, k := range kafkaBrokerKeys {
		got = append(got, k.name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("kafkaBrokerKeys are not Kafka 4.1.1's broker keys, in order:\n  only ours: %v\n  only Kafka's: %v", minus(got, want), minus(want, got))
	}
	for i, r := range rows {
		k := kafkaBrokerKeys[i]
		if g := strings.ToUpper(k.kind.String()); g != r.kind {
			t.Errorf("%s: type %s, Kafka's %s", k.name, g, r.kind)
		}
		if g := brokertest.ConfigValue(k.defaultValue()); g != r.dflt {
			t.Errorf("%s: default %s, Kafka's %s", k.name, g, r.dflt)
		}
		if k.mode.String() != r.mode {
			t.Errorf("%s: update mode %s, Kafka's %s", k.name, k.mode, r.mode)
		}
		d, ours := lookupBrokerConfig(k.name)
		if (k.doc == "") != ours {
			t.Errorf("%s: documented in kafkaBrokerKeys %v, in brokerConfigDefs %v; want exactly one "+
				"(a key ringbroker acts on is documented in brokerConfigDefs: drop its doc from kafkaBrokerKeys)", k.name, k.doc != "", ours)
		}
		if !ours {
			continue
		}
		if d.kind != k.kind {
			t.Errorf("%s: ringbroker's type %s, Kafka's %s", k.name, d.kind, k.kind)
		}
		if g := brokertest.ConfigValue(brokerDefault(k.name)); g != r.dflt && ringbrokerDefaults[k.name] == "" {
			t.Errorf("%s: ringbroker's default %s, Kafka's %s, and no reason in ringbrokerDefaults", k.name, g, r.dflt)
		} else if g == r.dflt && ringbrokerDefaults[k.name] != "" {
			t.Errorf("%s: ringbroker's default is Kafka's %s; drop it from ringbrokerDefaults", k.name, g)
		}
		if d.dynamic && k.mode == readOnly {
			t.Errorf("%s: dynamic in ringbroker, read-only in Kafka", k.name)
		}
	}
}

// minus is the items of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// TestKafkaTopicKeys checks topicConfigDefs against Kafka 4.1.1's topic configs (testdata):
// the same keys but ringbroker's own, of Kafka's types, with Kafka's defaults on a broker with
// the default configuration; and that remote storage, which ringbroker lacks, is refused.
func TestKafkaTopicKeys(t *testing.T) {
	rows := readKafkaConfigs(t, "testdata/kafka-4.1.1-topic-configs.tsv")
	want := rowNames(rows)
	var got []string
	for _, d := range topicConfigDefs {
		if !d.own {
			got = append(got, d.name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("topicConfigDefs are not Kafka 4.1.1's topic configs:\n  only ours: %v\n  only Kafka's: %v", minus(got, want), minus(want, got))
	}
	c := DefaultConfig()
	for _, r := range rows {
		d, _ := lookupTopicConfig(r.name)
		if g := strings.ToUpper(d.kind.String()); g != r.kind {
			t.Errorf("%s: type %s, Kafka's %s", r.name, g, r.kind)
		}
		if v := d.defaultValue(&c); brokertest.ConfigValue(&v) != r.dflt {
			t.Errorf("%s: default %q, Kafka's %s", r.name, v, r.dflt)
		}
		if err := validateTopicConfig(r.name, d.defaultValue(&c)); err != nil {
			t.Errorf("%s: default refused: %v", r.name, err)
		}
	}
	if err := validateTopicConfig("remote.storage.enable", "true"); err == nil || !strings.Contains(err.Error(), "ringbroker does not support remote storage") {
		t.Errorf("remote.storage.enable=true: %v; want a refusal", err)
	}
}
