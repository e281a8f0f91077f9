package coord

import (
	"testing"

	"ringbroker/internal/testutil"
)

// TestAPIHeaders checks that each API file's header states the versions its declaration serves.
func TestAPIHeaders(t *testing.T) {
	var served []testutil.ServedAPI
	for _, a := range APIs() {
		served = append(served, testutil.ServedAPI{Key: int16(a.Key), MinVersion: a.MinVersion, MaxVersion: a.MaxVersion})
	}
	testutil.CheckAPIHeaders(t, ".", served)
}
