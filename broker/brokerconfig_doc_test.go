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
// synonyms beside it and whether it is a dynamic broker config, and the keys accepted without effect in a sentence after.
func brokerConfigMarkdown() string {
	synonyms := map[string][]string{}
	var ignored []string
	for _, d := range brokerConfigDefs {
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
		}
		dynamic := "no"
		if d.dynamic {
			dynamic = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", key, d.kind, dflt, dynamic, d.doc)
	}
	fmt.Fprintf(&b, "\nAccepted for compatibility with Kafka's sample `server.properties`, with no effect yet: %s.\n", strings.Join(ignored, ", "))
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
