package bench

import "testing"

// TestTimerfdClockSleepUntil: a sleep does not end before its time, and a cancelled
// context ends one at once, after which the clock sleeps again.
func TestTimerfdClockSleepUntil(t *testing.T) {
	clk, err := NewTimerfdClock()
	if err != nil {
		t.Fatal(err)
	}
	defer clk.Close()
	checkClockSleepUntil(t, clk)
}
