package ring

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TLS throughput and latency against plaintext on each backend. Client and server share the
// machine, so for TLS both the server's and the client's crypto count; cpu-µs/MiB is the CPU
// time (user+system, both sides) per MiB moved.

// benchModes are the listener kinds each benchmark compares.
var benchModes = []string{"plain", "tls"}

// startBenchServer starts a server of backend with one ring, TLS when mode is "tls", and
// connects a client to it.
func startBenchServer(b *testing.B, p *testPKI, backend Backend, mode string, h Handler) (*Server, net.Conn) {
	b.Helper()
	cfg := Config{Backend: backend, Rings: 1}
	if mode == "tls" {
		cfg.TLS = p.serverTLS(tls.NoClientCert)
		s := startServer(b, cfg, h)
		return s, dialTLS(b, s, p.clientTLS())
	}
	s := startServer(b, cfg, h)
	return s, dial(b, s)
}

// cpuMeter measures this process's CPU time over a benchmark.
type cpuMeter struct{ start unix.Rusage }

func startCPU() *cpuMeter {
	m := &cpuMeter{}
	_ = unix.Getrusage(unix.RUSAGE_SELF, &m.start)
	return m
}

// report adds cpu-µs/MiB for bytes moved.
func (m *cpuMeter) report(b *testing.B, bytes int64) {
	var end unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &end)
	cpu := time.Duration(end.Utime.Nano() + end.Stime.Nano() - m.start.Utime.Nano() - m.start.Stime.Nano())
	if bytes > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/(float64(bytes)/(1<<20)), "cpu-µs/MiB")
	}
}

// BenchmarkTLSStream: the server pushes 1 MiB memory sends to one reader.
func BenchmarkTLSStream(b *testing.B) {
	const size = 1 << 20
	p := newTestPKI(b)
	for _, be := range backends {
		for _, mode := range benchModes {
			b.Run(string(be)+"/"+mode, func(b *testing.B) {
				h := make(openerHandler, 1)
				_, c := startBenchServer(b, p, be, mode, h)
				sc := <-h
				payload := make([]byte, size)
				b.SetBytes(size)
				cpu := startCPU()
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
				b.StopTimer()
				cpu.report(b, int64(b.N)*size)
			})
		}
	}
}

// BenchmarkTLSFileStream: the server sends 1 MiB ranges of a file in the page cache, one at a
// time as a consumer's fetch would: sendfile on plaintext, pread and encrypt on TLS.
func BenchmarkTLSFileStream(b *testing.B) {
	const chunk = 1 << 20
	const fileSize = 64 << 20
	p := newTestPKI(b)
	_, f := writeTestFile(b, fileSize)
	fd := int(f.Fd())
	for _, be := range backends {
		for _, mode := range benchModes {
			b.Run(string(be)+"/"+mode, func(b *testing.B) {
				h := make(openerHandler, 1)
				_, c := startBenchServer(b, p, be, mode, h)
				sc := <-h
				b.SetBytes(chunk)
				cpu := startCPU()
				b.ResetTimer()
				done := make(chan error, 1)
				go func() {
					_, err := io.CopyN(io.Discard, c, int64(b.N)*chunk)
					done <- err
				}()
				sent := make(chan struct{}, 1)
				for i := range b.N {
					off := int64(i%(fileSize/chunk)) * chunk
					if err := sc.Send([]Piece{FileRange(fd, off, chunk)}, func() { sent <- struct{}{} }); err != nil {
						b.Fatal(err)
					}
					<-sent
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu.report(b, int64(b.N)*chunk)
			})
		}
	}
}

// BenchmarkTLSUpload: the client writes 1 MiB frames that the server receives with Fill, as
// Produce requests are.
func BenchmarkTLSUpload(b *testing.B) {
	const size = 1 << 20
	p := newTestPKI(b)
	for _, be := range backends {
		for _, mode := range benchModes {
			b.Run(string(be)+"/"+mode, func(b *testing.B) {
				h := newFrameHandler(b)
				_, c := startBenchServer(b, p, be, mode, h)
				msg := frame(1, size)
				b.SetBytes(size)
				cpu := startCPU()
				b.ResetTimer()
				go func() {
					for range b.N {
						if _, err := c.Write(msg); err != nil {
							b.Error(err)
							return
						}
					}
				}()
				for range b.N {
					select {
					case <-h.got:
					case <-time.After(30 * time.Second):
						b.Fatal("frame never arrived")
					}
				}
				b.StopTimer()
				cpu.report(b, int64(b.N)*size)
			})
		}
	}
}

// BenchmarkTLSPingPong: one connection, one 64-byte message in flight; ns/op is the round trip.
func BenchmarkTLSPingPong(b *testing.B) {
	p := newTestPKI(b)
	for _, be := range backends {
		for _, mode := range benchModes {
			b.Run(string(be)+"/"+mode, func(b *testing.B) {
				_, c := startBenchServer(b, p, be, mode, rawEcho{})
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
}
