package ring

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestAdopted hands over connections whose first bytes the acceptor already read, as a port
// shared with another protocol does: the handler sees the stream whole, head first, each
// connection closes with OnClose on Shutdown, and a connection handed over after Shutdown is
// closed at once.
func TestAdopted(t *testing.T) {
	h := newEchoHandler(t)
	a, err := Adopt(Config{Logger: quietLogger()}, h)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// accept takes one connection and reads n of its first bytes, as an acceptor classifying it.
	accept := func(n int) (*net.TCPConn, []byte) {
		t.Helper()
		nc, err := ln.AcceptTCP()
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, n)
		if _, err := io.ReadFull(nc, head); err != nil {
			t.Fatal(err)
		}
		return nc, head
	}
	for _, n := range []int{1, 4, 14} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		want := frame(n, 10)
		want = append(want, frame(n+1, 300)...)
		if _, err := c.Write(want); err != nil {
			t.Fatal(err)
		}
		a.Serve(accept(n))
		got := make([]byte, len(want))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("head of %d bytes: read the echo: %v", n, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("head of %d bytes: echo %x; want %x", n, got, want)
		}
	}
	if st := a.Stats(); st.Accepted != 3 || st.Open != 3 {
		t.Fatalf("stats %+v; want 3 accepted and open", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := h.closes.Load(); n != 3 {
		t.Fatalf("%d OnClose after Shutdown; want 3", n)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a.Serve(accept(0))
	if b, err := readToEnd(c, 5*time.Second); err != nil || len(b) > 0 {
		t.Fatalf("a connection handed over after Shutdown read %q, %v; want it closed", b, err)
	}
	h.checkDones(t)
}
