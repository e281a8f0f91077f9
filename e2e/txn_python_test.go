package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnConfluentPython runs confluent_txn.py: confluent-kafka-python (librdkafka) commits a
// transaction of clientRecords records, aborts one of as many, and reads the topic back at
// read_committed in a group, seeing each committed record once and no aborted one. franz-go
// then reads the topic at both isolation levels: read_committed holds the committed records
// only, read_uncommitted the aborted ones too, so the abort hid records that were written.
func TestTxnConfluentPython(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t, "group.initial.rebalance.delay.ms=0")
		const topic, partitions = "confluent-txn", 3
		env := []string{"PYTHONPATH=" + filepath.Join(repoRoot(), pythonClients), "SENTINEL=" + txnSentinel}
		out := runScript(t, env, b.Addr(), topic, "python3", filepath.Join("testdata", "clients", "confluent_txn.py"))
		if want := fmt.Sprintf("OK %d", clientRecords); !strings.Contains(out, want) {
			t.Fatalf("confluent_txn.py printed %q, want %q", out, want)
		}
		for _, c := range []struct {
			level            kgo.IsolationLevel
			committed, abort int
		}{
			{kgo.ReadCommitted(), clientRecords, 0},
			{kgo.ReadUncommitted(), clientRecords, clientRecords},
		} {
			var committed, aborted int
			for p, rs := range readToSentinels(t, b, topic, partitions, c.level) {
				for _, r := range rs {
					switch v := string(r.Value); {
					case strings.HasPrefix(v, "c"):
						committed++
					case strings.HasPrefix(v, "a"):
						aborted++
					default:
						t.Fatalf("%s read %q at %d@%d; the script writes no such record", isolationName(c.level), v, p, r.Offset)
					}
				}
			}
			if committed != c.committed || aborted != c.abort {
				t.Fatalf("%s read %d committed and %d aborted records; want %d and %d",
					isolationName(c.level), committed, aborted, c.committed, c.abort)
			}
		}
	})
}
