package ring

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// BenchmarkSendFileVsMmap sends 1 MiB ranges of a file in the page cache to one reader, with
// sendfile (FileRange) and with sendmsg from a read-only mapping of the same file (Bytes),
// keeping the pages mapped or dropping them after each send, as Fetch would, reporting CPU per
// MiB (user+system, both sides) and the resident pages the mapping left behind in the process
// (RssFile). One Send in flight at a time, as a consumer's fetch.
func BenchmarkSendFileVsMmap(b *testing.B) {
	const chunk = 1 << 20
	const fileSize = 64 << 20
	path := filepath.Join(b.TempDir(), "segment")
	data := make([]byte, fileSize)
	for i := range data {
		data[i] = byte(i * 13)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	mapped, err := unix.Mmap(fd, 0, fileSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mapped)
	for _, backend := range backends {
		for _, how := range []string{"sendfile", "mmap", "mmap+drop"} {
			b.Run(string(backend)+"/"+how, func(b *testing.B) {
				_ = unix.Madvise(mapped, unix.MADV_DONTNEED)
				h := make(openerHandler, 1)
				s := startServer(b, Config{Backend: backend, Rings: 1}, h)
				c := dial(b, s)
				sc := <-h
				b.SetBytes(chunk)
				var ru0, ru1 unix.Rusage
				_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
				b.ResetTimer()
				done := make(chan error, 1)
				go func() {
					_, err := io.CopyN(io.Discard, c, int64(b.N)*chunk)
					done <- err
				}()
				sent := make(chan struct{}, 1)
				for i := range b.N {
					off := int64(i%(fileSize/chunk)) * chunk
					p := FileRange(fd, off, chunk)
					done := func() { sent <- struct{}{} }
					switch how {
					case "mmap":
						p = Bytes(mapped[off : off+chunk])
					case "mmap+drop":
						// As a broker bounding its RSS would: unmap the pages once sent.
						p = Bytes(mapped[off : off+chunk])
						done = func() {
							_ = unix.Madvise(mapped[off:off+chunk], unix.MADV_DONTNEED)
							sent <- struct{}{}
						}
					}
					if err := sc.Send([]Piece{p}, done); err != nil {
						b.Fatal(err)
					}
					<-sent
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/MiB")
				b.ReportMetric(float64(rssFileKiB(b))/1024, "rss-file-MiB")
			})
		}
	}
}

// rssFileKiB reads RssFile of this process from /proc/self/status.
func rssFileKiB(b *testing.B) int {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return n
		}
	}
	return 0
}
