package raft

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestTransportPreamble sends one message over a raw connection with and without the
// preamble: with it the message arrives; without it (a stream of another protocol, say a Kafka
// request of the same bytes) the transport closes the connection and delivers nothing.
func TestTransportPreamble(t *testing.T) {
	got := make(chan Message, 1)
	tr, err := NewTransport(TransportConfig{ID: 2, Listen: "127.0.0.1:0", Recv: func(m Message) { got <- m }})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	frame := appendFrame(nil, Message{Type: MsgHeartbeat, From: 1, To: 2, Term: 3})
	for _, preamble := range []bool{true, false} {
		c, err := net.Dial("tcp", tr.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		out := frame
		if preamble {
			out = append([]byte(Preamble), frame...)
		}
		if _, err := c.Write(out); err != nil {
			t.Fatal(err)
		}
		if preamble {
			select {
			case m := <-got:
				if m.Term != 3 || m.From != 1 {
					t.Fatalf("received %+v; want the heartbeat sent", m)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the message after the preamble did not arrive")
			}
			continue
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("without the preamble: read %d, %v; want the connection closed", n, err)
		}
		select {
		case m := <-got:
			t.Fatalf("without the preamble: received %+v", m)
		default:
		}
	}
}
