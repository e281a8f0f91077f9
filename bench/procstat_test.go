package bench

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProcStatCPU(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 250 130 0 0 20 0 40 0 100 0 0"
	tests := []struct {
		name, stat string
		want       float64
		wantErr    string
	}{
		{"plain", "1234 (java)" + tail, 3.8, ""},
		{"name with spaces and parens", "1234 (a) b (c)" + tail, 3.8, ""},
		{"no name", "1234 java S 1", 0, "no ')'"},
		{"short", "1234 (java) S 1 2", 0, "fields after the command name"},
		{"bad number", "1234 (java) S 1 2 3 4 5 6 7 8 9 10 x 130 0", 0, `utime "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStatCPU([]byte(tt.stat))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestParseProcStatusKB(t *testing.T) {
	const status = "Name:\tjava\nVmPeak:\t 999 kB\nVmRSS:\t  2048 kB\nRssAnon:\t 1024 kB\nRssFile:\t 1024 kB\nThreads: 3\n"
	tests := []struct {
		name, status, field string
		want                uint64
		wantErr             string
	}{
		{"rss", status, "VmRSS", 2048 * 1024, ""},
		{"anon, not a prefix of another field", status, "RssAnon", 1024 * 1024, ""},
		{"absent", "Name:\tkthreadd\nState:\tS\n", "VmRSS", 0, "VmRSS: no such field"},
		{"bad unit", "VmRSS:\t 12 MB\n", "VmRSS", 0, "want"},
		{"bad number", "VmRSS:\t 1x kB\n", "VmRSS", 0, `VmRSS "1x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStatusKB([]byte(tt.status), tt.field)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestReadProcSelf(t *testing.T) {
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSBytes == 0 || s.AnonRSSBytes == 0 || s.AnonRSSBytes > s.RSSBytes {
		t.Fatalf("own RSS %d B, anonymous %d B; want 0 < anonymous <= RSS", s.RSSBytes, s.AnonRSSBytes)
	}
	if _, err := ReadProc(-1); err == nil {
		t.Fatal("ReadProc(-1) succeeded")
	}
}

func TestParseProcStatMachine(t *testing.T) {
	tests := []struct {
		name, stat string
		want       MachineSample
		wantErr    string
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice
		{"counts all but idle and iowait", "cpu  100 5 50 700 40 3 2 0 9 0\ncpu0 50 2 25 350 20 1 1 0 4 0\n",
			MachineSample{BusySeconds: 1.6, TotalSeconds: 9, Cores: 1}, ""},
		{"aggregate line after others", "intr 1\ncpu  10 0 10 80 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0\n",
			MachineSample{BusySeconds: 0.2, TotalSeconds: 1, Cores: 2}, ""},
		{"no aggregate line", "cpu0 1 2 3 4 5 6 7 8\n", MachineSample{}, "aggregate cpu line found: false"},
		{"no core lines", "cpu  1 2 3 4 5 6 7 8\n", MachineSample{}, "0 per-core lines"},
		{"short", "cpu  1 2 3\n", MachineSample{}, "3 fields"},
		{"bad number", "cpu  1 2 x 4 5 6 7 8\n", MachineSample{}, `field 3 "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStatMachine([]byte(tt.stat))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || math.Abs(got.BusySeconds-tt.want.BusySeconds) > 1e-9 || math.Abs(got.TotalSeconds-tt.want.TotalSeconds) > 1e-9 || got.Cores != tt.want.Cores {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestReadMachine(t *testing.T) {
	s, err := ReadMachine()
	if err != nil {
		t.Fatal(err)
	}
	if s.TotalSeconds <= 0 || s.BusySeconds <= 0 || s.BusySeconds > s.TotalSeconds || s.Cores < 1 {
		t.Fatalf("machine %+v; want 0 < busy <= total", s)
	}
}

func TestMachineWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var w machineWindow
	w.add(t0, MachineSample{BusySeconds: 10, TotalSeconds: 40, Cores: 2}, 3, nil)
	w.add(t0.Add(10*time.Second), MachineSample{BusySeconds: 25, TotalSeconds: 60, Cores: 2}, 8, nil)
	w.add(t0.Add(20*time.Second), MachineSample{}, 0, errors.New("ignored: the window is full"))
	u := w.usage()
	if u == nil || u.Cores != 2 || math.Abs(u.BusyCores-1.5) > 1e-9 || math.Abs(u.ClientCores-0.5) > 1e-9 {
		t.Fatalf("usage %+v, want 2 cores, 1.5 busy, ringbench 0.5", u)
	}

	var failed machineWindow
	failed.add(t0, MachineSample{}, 0, errors.New("no /proc"))
	failed.add(t0.Add(10*time.Second), MachineSample{BusySeconds: 1, TotalSeconds: 2, Cores: 2}, 1, nil)
	failed.add(t0.Add(20*time.Second), MachineSample{BusySeconds: 2, TotalSeconds: 4, Cores: 2}, 2, nil)
	if u := failed.usage(); u != nil {
		t.Fatalf("usage %+v after a failed first reading, want none", u)
	}
	var half machineWindow
	half.add(t0, MachineSample{BusySeconds: 1, TotalSeconds: 2, Cores: 2}, 1, nil)
	if u := half.usage(); u != nil {
		t.Fatalf("usage %+v from one reading, want none", u)
	}
}
