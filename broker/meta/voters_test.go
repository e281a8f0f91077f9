package meta

import (
	"testing"
)

func TestParseVoters(t *testing.T) {
	v, err := ParseVoters("1@127.0.0.1:9093, 2@localhost:9094")
	if err != nil || len(v) != 2 || v[2] != "localhost:9094" {
		t.Fatalf("ParseVoters = %v, %v", v, err)
	}
	for _, bad := range []string{"", "1@", "x@h:1", "1@h:1,1@h:2", "1:h:1"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("ParseVoters(%q) accepted", bad)
		}
	}
}
