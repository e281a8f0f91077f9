package ring

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// rawEcho sends back every chunk it receives, unframed.
type rawEcho struct{}

func (rawEcho) OnOpen(Conn) {}

func (rawEcho) OnData(c Conn, data []byte) (Next, error) {
	return Next{Consumed: len(data)}, c.Send(pieces(bytes.Clone(data)), nil)
}

func (rawEcho) OnFilled(Conn) (Next, error) { return Next{}, nil }

func (rawEcho) OnClose(Conn, error) {}

// openerHandler hands each new Conn to a channel and ignores its data.
type openerHandler chan Conn

func (h openerHandler) OnOpen(c Conn) { h <- c }
func (openerHandler) OnData(_ Conn, data []byte) (Next, error) {
	return Next{Consumed: len(data)}, nil
}
func (openerHandler) OnFilled(Conn) (Next, error) { return Next{}, nil }
func (openerHandler) OnClose(Conn, error)         {}

// BenchmarkPingPong: one connection, one 64-byte message in flight; ns/op is the round trip.
func BenchmarkPingPong(b *testing.B) {
	for _, be := range backends {
		b.Run(string(be), func(b *testing.B) {
			s := startServer(b, Config{Backend: be, Rings: 1}, rawEcho{})
			c := dial(b, s)
			msg := make([]byte, 64)
			in := make([]byte, 64)
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPipelined: 64 connections each keep a window of small messages in
// flight (written 16 per write); ns/op is per message across all connections.
func BenchmarkPipelined(b *testing.B) {
	const conns, msgSize, batch = 64, 64, 16
	for _, be := range backends {
		b.Run(string(be), func(b *testing.B) {
			s := startServer(b, Config{Backend: be}, rawEcho{})
			cs := make([]net.Conn, conns)
			for i := range cs {
				cs[i] = dial(b, s)
			}
			perConn := max(b.N/conns, batch)
			perConn -= perConn % batch
			out := make([]byte, msgSize*batch)
			b.SetBytes(msgSize)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Add(2)
				go func() {
					defer wg.Done()
					for i := 0; i < perConn; i += batch {
						if _, err := c.Write(out); err != nil {
							b.Error(err)
							return
						}
					}
				}()
				go func() {
					defer wg.Done()
					if _, err := io.CopyN(io.Discard, c, int64(perConn*msgSize)); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(perConn*conns)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// BenchmarkStream: the server pushes 1 MiB sends to one reader, with SEND_ZC
// and with plain sends, to set the SEND_ZC threshold by measurement.
func BenchmarkStream(b *testing.B) {
	const size = 1 << 20
	tests := []struct {
		backend Backend
		zc      int
	}{
		{Uring, 64 << 10},
		{Uring, -1},
		{Netpoll, 0},
	}
	for _, tt := range tests {
		name := string(tt.backend)
		if tt.backend == Uring {
			name = fmt.Sprintf("%s/zc=%v", tt.backend, tt.zc > 0)
		}
		b.Run(name, func(b *testing.B) {
			h := make(openerHandler, 1)
			s := startServer(b, Config{Backend: tt.backend, Rings: 1, SendZCThreshold: tt.zc, SendZCLoopback: true}, h)
			c := dial(b, s)
			sc := <-h
			payload := make([]byte, size)
			b.SetBytes(size)
			b.ResetTimer()
			done := make(chan error, 1)
			go func() {
				_, err := io.CopyN(io.Discard, c, int64(b.N)*size)
				done <- err
			}()
			for range b.N {
				if err := sc.Send(pieces(payload), nil); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
