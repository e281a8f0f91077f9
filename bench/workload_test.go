package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseWorkload(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    func(w *Workload) bool
		wantErr string
	}{
		{
			name: "full yaml",
			in: `name: w
topics: 2
partitionsPerTopic: 16
messageSize: 1024
keyDistribution: KEY_ROUND_ROBIN
producersPerTopic: 3
consumerPerSubscription: 2
producerRate: 50000
acks: 1
compression: ZSTD
lingerMs: 5
batchSize: 65536
warmupDuration: 5s
testDuration: 2m`,
			want: func(w *Workload) bool {
				return w.Name == "w" && w.Topics == 2 && w.PartitionsPerTopic == 16 && w.MessageSize == 1024 &&
					w.KeyDistribution == KeyRoundRobin && w.ProducersPerTopic == 3 && w.ConsumerPerSubscription == 2 &&
					w.ProducerRate == 50000 && w.Acks == "1" && w.Compression == "zstd" && w.LingerMs == 5 &&
					w.BatchSize == 65536 && time.Duration(w.WarmupDuration) == 5*time.Second &&
					time.Duration(w.TestDuration) == 2*time.Minute && w.ReplicationFactor == 1
			},
		},
		{
			name: "defaults fill omitted keys",
			in:   "name: minimal",
			want: func(w *Workload) bool {
				d := DefaultWorkload()
				d.Name = "minimal"
				return *w == d
			},
		},
		{
			name: "json and numeric seconds",
			in:   `{"name": "j", "acks": -1, "testDuration": 90, "warmupDuration": "0s", "producerRate": 12.5}`,
			want: func(w *Workload) bool {
				return w.Acks == "all" && time.Duration(w.TestDuration) == 90*time.Second && w.WarmupDuration == 0 && w.ProducerRate == 12.5
			},
		},
		{
			name: "transactions",
			in:   "name: t\ntransactionSize: 100\npartitionsPerTopic: 16\nproducersPerTopic: 4",
			want: func(w *Workload) bool {
				return w.TransactionSize == 100 && w.Acks == "all" && w.PartitionsPerTopic == 16 && w.ProducersPerTopic == 4
			},
		},
		{name: "transactions need acks=all", in: "name: x\ntransactionSize: 10\nacks: 1", wantErr: "transactionSize=10 with acks=1"},
		{name: "negative transaction size", in: "name: x\ntransactionSize: -1", wantErr: "transactionSize=-1"},
		{name: "huge transaction size", in: "name: x\ntransactionSize: 100001", wantErr: "transactionSize=100001"},
		{name: "empty", in: "", wantErr: "empty document"},
		{name: "unknown key", in: "name: x\npartitions: 3", wantErr: "field partitions not found"},
		{name: "no name", in: "topics: 1", wantErr: "name is empty"},
		{name: "small message", in: "name: x\nmessageSize: 4", wantErr: "messageSize=4"},
		{name: "bad key distribution", in: "name: x\nkeyDistribution: ZIPF", wantErr: `keyDistribution="ZIPF"`},
		{name: "bad acks", in: "name: x\nacks: 2", wantErr: `acks="2"`},
		{name: "bad compression", in: "name: x\ncompression: brotli", wantErr: `compression="brotli"`},
		{name: "negative rate", in: "name: x\nproducerRate: -5", wantErr: "producerRate=-5"},
		{name: "zero duration", in: "name: x\ntestDuration: 0s", wantErr: "testDuration=0s"},
		{name: "bad duration", in: "name: x\ntestDuration: soon", wantErr: `duration "soon"`},
		{name: "zero partitions", in: "name: x\npartitionsPerTopic: 0", wantErr: "partitionsPerTopic=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := ParseWorkload([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseWorkload error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(&w) {
				t.Fatalf("unexpected workload %+v", w)
			}
		})
	}
}

// TestShippedWorkloads loads every file in workloads/ so a typo there fails CI.
func TestShippedWorkloads(t *testing.T) {
	files, err := filepath.Glob("workloads/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"1kb-fixed-rate-16p": true, "max-throughput": true, "small-messages": true, "100-partitions": true, "transactions": true}
	for _, f := range files {
		w, err := LoadWorkload(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if base := strings.TrimSuffix(filepath.Base(f), ".yaml"); base != w.Name {
			t.Errorf("%s: name %q differs from the file name", f, w.Name)
		}
		if w.Name == "transactions" && (w.TransactionSize != 100 || w.MessageSize != 1024 || w.PartitionsPerTopic != 16 || w.ConsumerPerSubscription == 0) {
			t.Errorf("%s: %+v; want transactions of 100 records of 1 KiB over 16 partitions, read by a consumer", f, w)
		}
		delete(want, w.Name)
	}
	if len(want) > 0 {
		t.Errorf("missing workloads: %v", want)
	}
}

func TestWorkloadPayload(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.data"), []byte("0123456789abcdef"), 0o644); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(wf, []byte("name: p\npayloadFile: p.data\nmessageSize: 0"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := LoadWorkload(wf)
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.Payload(1)
	if err != nil || string(p) != "0123456789abcdef" {
		t.Fatalf("Payload = %q, %v; want the file's bytes", p, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "short.data"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.PayloadFile = "short.data"
	if _, err := w.Payload(1); err == nil || !strings.Contains(err.Error(), "has 3 bytes") {
		t.Fatalf("short payload error = %v", err)
	}

	r := DefaultWorkload()
	r.MessageSize = 100
	a, _ := r.Payload(7)
	b, _ := r.Payload(7)
	if len(a) != 100 || string(a) != string(b) {
		t.Fatalf("random payload is %d bytes or not deterministic per seed", len(a))
	}
}

func FuzzParseWorkload(f *testing.F) {
	for _, name := range []string{"1kb-fixed-rate-16p", "max-throughput", "small-messages", "100-partitions", "transactions"} {
		data, err := os.ReadFile(filepath.Join("workloads", name+".yaml"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"name":"j","acks":-1,"testDuration":1e300}`))
	f.Add([]byte("name: x\nwarmupDuration: -1s\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWorkload(data)
		if err != nil {
			return
		}
		if err := w.Validate(); err != nil {
			t.Fatalf("parsed workload fails validation: %v", err)
		}
	})
}

func FuzzReadStamp(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 9})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, v []byte) {
		ts, err := ReadStamp(v)
		if err != nil {
			if len(v) >= StampSize {
				t.Fatalf("ReadStamp(%x) failed: %v", v, err)
			}
			return
		}
		buf := make([]byte, StampSize)
		PutStamp(buf, ts)
		if string(buf) != string(v[:StampSize]) {
			t.Fatalf("stamp %x read as %v writes back as %x", v[:StampSize], ts, buf)
		}
	})
}
