package broker

import (
	"testing"

	"ringbroker/internal/testutil"
)

// TestAPIHeaders checks that each API file's header states the versions its declaration serves;
// the group coordinator's files are checked in coord/.
func TestAPIHeaders(t *testing.T) {
	var served []testutil.ServedAPI
	for _, a := range servedAPIs() {
		served = append(served, testutil.ServedAPI{Key: a.key.Int16(), MinVersion: a.minVersion, MaxVersion: a.maxVersion,
			AdvertisedFromZero: a.advertiseFromZero})
	}
	testutil.CheckAPIHeaders(t, ".", served)
}
