package brokertest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortDistinct checks that FreePort never hands out a port twice in one process, as
// parallel tests starting brokers need, and that each port it returns can be bound.
func TestFreePortDistinct(t *testing.T) {
	seen := map[int]bool{}
	for range 300 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	for p := range seen {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d from FreePort cannot be bound: %v", p, err)
		}
		ln.Close()
	}
}
