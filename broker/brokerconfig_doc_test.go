package broker

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The README's table of broker config keys sits between these markers and is generated from
// brokerConfigDefs by brokerConfigMarkdown.
const (
	readmeConfigBegin = "<!-- broker config keys: generated from broker/brokerconfig.go by TestREADMEBrokerConfigKeys; do not edit -->\n"
	readmeConfigEnd   = "<!-- end of broker config keys -->\n"
	// readmeUpdateEnv, set to 1, makes TestREADMEBrokerConfigKeys write the table instead of
	// comparing it.
	readmeUpdateEnv = "RINGBROKER_UPDATE_README"
)

// brokerConfigMarkdown renders brokerConfigDefs as the README's table: one row a key, its
// synonyms beside it and whether it is a dynamic broker config, and the keys accepted without
// effect in a sentence after; then Kafka's keys that ringbroker lists without acting on them
// (kafkaBrokerKeys), in a table of their own.
func brokerConfigMarkdown() string {
	synonyms := map[string][]string{}
	synonymDefaults := map[string]string{}
	var ignored []string
	for _, d := range brokerConfigDefs {
		if d.synonymOf != "" && d.dflt != "" {
			synonymDefaults[d.synonymOf] = fmt.Sprintf("`%s` (%s)", d.dflt, d.name)
		}
		switch {
		case d.synonymOf != "" && d.scale != 0:
			synonyms[d.synonymOf] = append(synonyms[d.synonymOf], fmt.Sprintf("`%s` (%s)", d.name, strings.TrimPrefix(d.doc, d.synonymOf+" in ")))
		case d.synonymOf != "":
			synonyms[d.synonymOf] = append(synonyms[d.synonymOf], fmt.Sprintf("`%s`", d.name))
		case d.ignored:
			ignored = append(ignored, fmt.Sprintf("`%s`", d.name))
		}
	}
	var b strings.Builder
	b.WriteString("| key | type | default | dynamic | meaning |\n|---|---|---|---|---|\n")
	for _, d := range brokerConfigDefs {
		if d.get == nil {
			continue
		}
		key := "`" + d.name + "`"
		if s := synonyms[d.name]; len(s) > 0 {
			key += ", or " + strings.Join(s, ", ")
		}
		dflt := "unset"
		if d.dflt != "" {
			dflt = "`" + d.dflt + "`"
		} else if sd, ok := synonymDefaults[d.name]; ok {
			dflt = sd
		}
		dynamic := "no"
		if d.dynamic {
			dynamic = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", key, d.kind, dflt, dynamic, d.doc)
	}
	fmt.Fprintf(&b, "\nAccepted for compatibility with Kafka's sample `server.properties`, with no effect yet: %s.\n", strings.Join(ignored, ", "))
	b.WriteString("\nDescribeConfigs (`kafka-configs --describe --all`) lists every broker key Apache Kafka 4.1.1 lists. " +
		"These are listed with Kafka's default and read-only, and ringbroker does not act on them: " +
		"`server.properties` may set them, as for Kafka, and the value is checked for its type, listed (STATIC_BROKER_CONFIG) and logged at start as not acted on; " +
		"IncrementalAlterConfigs refuses them (INVALID_REQUEST) with Kafka's message for " +
		"read-only keys and, for keys Kafka changes while running, one saying that ringbroker does not support changing them.\n\n" +
		"<details><summary>Kafka keys listed but not acted on</summary>\n\n| key | type | Kafka's default | Kafka's update mode | meaning in Kafka |\n|---|---|---|---|---|\n")
	for _, k := range kafkaBrokerKeys {
		if _, ours := lookupBrokerConfig(k.name); ours {
			continue
		}
		dflt := "unset"
		if v := k.defaultValue(); v != nil {
			dflt = "`" + *v + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.name, k.kind, dflt, k.mode, k.doc)
	}
	b.WriteString("\n</details>\n")
	return b.String()
}

// TestREADMEBrokerConfigKeys fails when the README's table of broker config keys is not what
// brokerConfigDefs makes of it; with RINGBROKER_UPDATE_README=1 it rewrites the table.
func TestREADMEBrokerConfigKeys(t *testing.T) {
	const path = "../README.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	begin, end := strings.Index(readme, readmeConfigBegin), strings.Index(readme, readmeConfigEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no table of broker config keys between %q and %q", path, readmeConfigBegin, readmeConfigEnd)
	}
	begin += len(readmeConfigBegin)
	want := brokerConfigMarkdown()
	if readme[begin:end] == want {
		return
	}
	if os.Getenv(readmeUpdateEnv) == "1" {
		if err := os.WriteFile(path, []byte(readme[:begin]+want+readme[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s: the table of broker config keys differs from brokerConfigDefs; regenerate it with\n"+
		"  %s=1 go test -ldflags=-checklinkname=0 -run TestREADMEBrokerConfigKeys ./broker/", path, readmeUpdateEnv)
}
