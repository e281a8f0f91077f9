// Package testutil holds helpers that tests of several ringbroker packages share, so that each
// is written once: the bounded wait (WaitFor), the scenario-script runner (RunScript), the
// record batch builder (NewBatch, SealBatch), compression fixtures (Payload, KgoCompressor)
// and the check that API files' header comments state the versions served (CheckAPIHeaders).
//
// Only tests import it. Of ringbroker's packages it imports only internal/crc32c and
// internal/recordbatch, so any package's tests may use it without bending the dependency rule.
package testutil
