package timingwheel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var epoch = time.Unix(1_700_000_000, 0)

func newWheel(t testing.TB, tick time.Duration, slots int) *Wheel {
	t.Helper()
	w, err := New(tick, slots, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestNewRejectsBadParameters(t *testing.T) {
	for _, tc := range []struct {
		tick  time.Duration
		slots int
	}{{0, 8}, {-time.Millisecond, 8}, {time.Millisecond, 0}} {
		if _, err := New(tc.tick, tc.slots, epoch); err == nil {
			t.Errorf("New(%v, %d) succeeded; want an error", tc.tick, tc.slots)
		}
	}
}

func TestFiresInOrder(t *testing.T) {
	tests := []struct {
		name    string
		delays  []time.Duration // timer i fires with label i
		advance []time.Duration // successive offsets from epoch
		want    string          // labels fired after each advance, "|" separated
	}{
		{"zero delay fires at next advance", []time.Duration{0}, []time.Duration{0}, "0"},
		{"exact deadline", []time.Duration{10 * time.Millisecond}, []time.Duration{9 * time.Millisecond, 10 * time.Millisecond}, "|0"},
		{"sub-tick precision", []time.Duration{1500 * time.Microsecond}, []time.Duration{1400 * time.Microsecond, 1500 * time.Microsecond}, "|0"},
		{"tick order", []time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}, []time.Duration{time.Second}, "1 2 0"},
		{"same tick keeps schedule order", []time.Duration{5 * time.Millisecond, 5 * time.Millisecond}, []time.Duration{5 * time.Millisecond}, "0 1"},
		{"beyond one rotation", []time.Duration{100 * time.Millisecond, 17 * time.Millisecond}, []time.Duration{16 * time.Millisecond, 17 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond}, "|1||0"},
		{"long idle jump", []time.Duration{time.Hour, 2 * time.Hour}, []time.Duration{time.Hour + time.Minute, 3 * time.Hour}, "0|1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWheel(t, time.Millisecond, 16)
			var fired []string
			for i, d := range tc.delays {
				w.AfterFunc(d, func() { fired = append(fired, fmt.Sprint(i)) })
			}
			var rounds []string
			for _, a := range tc.advance {
				fired = fired[:0]
				w.Advance(epoch.Add(a))
				rounds = append(rounds, strings.Join(fired, " "))
			}
			if got := strings.Join(rounds, "|"); got != tc.want {
				t.Errorf("fired %q; want %q", got, tc.want)
			}
			if w.Len() != 0 {
				t.Errorf("Len = %d after all fired", w.Len())
			}
		})
	}
}

func TestStop(t *testing.T) {
	w := newWheel(t, time.Millisecond, 8)
	var fired []int
	a := w.AfterFunc(time.Millisecond, func() { fired = append(fired, 1) })
	var c *Timer
	w.AfterFunc(2*time.Millisecond, func() {
		fired = append(fired, 2)
		if !c.Stop() { // stop a timer due in the same Advance
			t.Error("Stop of a due timer reported false")
		}
	})
	c = w.AfterFunc(2*time.Millisecond, func() { fired = append(fired, 3) })
	if !a.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if a.Stop() {
		t.Fatal("second Stop reported true")
	}
	w.Advance(epoch.Add(time.Second))
	if !slices.Equal(fired, []int{2}) {
		t.Fatalf("fired %v; want [2]", fired)
	}
	if c.Stop() || w.Len() != 0 {
		t.Fatalf("after firing: Stop true or Len %d", w.Len())
	}
}

// TestCallbackSchedules checks that timers scheduled from callbacks with due
// deadlines fire in the same Advance, and later ones do not.
func TestCallbackSchedules(t *testing.T) {
	w := newWheel(t, time.Millisecond, 4)
	var fired []string
	w.AfterFunc(time.Millisecond, func() {
		fired = append(fired, "a")
		w.AfterFunc(0, func() {
			fired = append(fired, "b")
			w.Schedule(epoch, func() { fired = append(fired, "c") })
		})
		w.AfterFunc(time.Millisecond, func() { fired = append(fired, "d") })
	})
	w.Advance(epoch.Add(time.Millisecond))
	if got := strings.Join(fired, ""); got != "abc" {
		t.Fatalf("fired %q; want abc", got)
	}
	w.Advance(epoch.Add(2 * time.Millisecond))
	if got := strings.Join(fired, ""); got != "abcd" {
		t.Fatalf("fired %q; want abcd", got)
	}
}

func TestTimeDoesNotGoBack(t *testing.T) {
	w := newWheel(t, time.Millisecond, 8)
	w.Advance(epoch.Add(time.Second))
	fired := false
	w.AfterFunc(time.Millisecond, func() { fired = true })
	w.Advance(epoch)
	if fired {
		t.Fatal("timer fired after time moved backwards")
	}
	w.Advance(epoch.Add(time.Second + time.Millisecond))
	if !fired {
		t.Fatal("timer did not fire")
	}
}

func TestNextDeadline(t *testing.T) {
	w := newWheel(t, time.Millisecond, 16)
	if _, ok := w.NextDeadline(); ok {
		t.Fatal("NextDeadline on an empty wheel reported true")
	}
	w.AfterFunc(time.Hour, func() {})
	got, _ := w.NextDeadline()
	if want := epoch.Add(16 * time.Millisecond); !got.Equal(want) {
		t.Fatalf("far timer: NextDeadline = %v; want end of rotation %v", got, want)
	}
	w.AfterFunc(7*time.Millisecond+300*time.Microsecond, func() {})
	got, _ = w.NextDeadline()
	if want := epoch.Add(7*time.Millisecond + 300*time.Microsecond); !got.Equal(want) {
		t.Fatalf("NextDeadline = %v; want %v", got, want)
	}
}

// TestRandomAgainstModel compares the wheel with a sorted-list model under
// random schedules, stops and advances.
func TestRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		w := newWheel(t, time.Millisecond, 1+rng.IntN(32))
		type entry struct {
			id       int
			deadline time.Time
			timer    *Timer
			done     bool
		}
		var entries []*entry
		var got []int
		now := epoch
		for step := range 300 {
			switch r := rng.IntN(10); {
			case r < 5:
				e := &entry{id: len(entries), deadline: now.Add(time.Duration(rng.Int64N(int64(200 * time.Millisecond))))}
				e.timer = w.Schedule(e.deadline, func() { got = append(got, e.id) })
				entries = append(entries, e)
			case r < 7 && len(entries) > 0:
				e := entries[rng.IntN(len(entries))]
				if stopped := e.timer.Stop(); stopped == e.done {
					t.Fatalf("iter %d step %d: Stop(%d) = %v with done=%v", iter, step, e.id, stopped, e.done)
				}
				e.done = true
			default:
				now = now.Add(time.Duration(rng.Int64N(int64(50 * time.Millisecond))))
				got = got[:0]
				w.Advance(now)
				var due []*entry
				for _, e := range entries {
					if !e.done && !e.deadline.After(now) {
						due = append(due, e)
						e.done = true
					}
				}
				gotSet := slices.Sorted(slices.Values(got))
				var want []int
				for _, e := range due {
					want = append(want, e.id)
				}
				if !slices.Equal(gotSet, want) {
					t.Fatalf("iter %d step %d: fired %v; want %v", iter, step, gotSet, want)
				}
			}
		}
	}
}

func BenchmarkScheduleStop(b *testing.B) {
	w := newWheel(b, time.Millisecond, 4096)
	fn := func() {}
	for i := range b.N {
		w.AfterFunc(time.Duration(i%45000)*time.Millisecond, fn).Stop()
	}
}
