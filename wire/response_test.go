package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAppendResponseHeader(t *testing.T) {
	meta := func() kmsg.Response {
		r := kmsg.NewPtrMetadataResponse()
		r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "h", Port: 9092}}
		return r
	}
	apiv := func() kmsg.Response {
		r := kmsg.NewPtrApiVersionsResponse()
		r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 3, MaxVersion: 11}}
		return r
	}
	tests := []struct {
		name     string
		h        RequestHeader
		resp     func() kmsg.Response
		wantTags bool
	}{
		{"metadata v8 header v0", RequestHeader{APIKey: 3, APIVersion: 8, CorrelationID: 11}, meta, false},
		{"metadata v12 header v1", RequestHeader{APIKey: 3, APIVersion: 12, CorrelationID: 12, Flexible: true}, meta, true},
		{"api versions v2 header v0", RequestHeader{APIKey: 18, APIVersion: 2, CorrelationID: 13}, apiv, false},
		{"api versions v3 still header v0", RequestHeader{APIKey: 18, APIVersion: 3, CorrelationID: 14, Flexible: true}, apiv, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("xyz")
			out := AppendResponse(prefix, tt.h, tt.resp())
			if string(out[:3]) != "xyz" {
				t.Fatal("prefix clobbered")
			}
			frame := out[3:]
			if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
				t.Fatalf("size %d, frame %d", binary.BigEndian.Uint32(frame), len(frame)-4)
			}
			if int32(binary.BigEndian.Uint32(frame[4:])) != tt.h.CorrelationID {
				t.Fatal("correlation id")
			}
			body := frame[8:]
			if tt.wantTags {
				if body[0] != 0 {
					t.Fatalf("header tag count %d", body[0])
				}
				body = body[1:]
			}
			want := tt.resp()
			want.SetVersion(tt.h.APIVersion)
			got := kmsg.ResponseForKey(tt.h.APIKey)
			got.SetVersion(tt.h.APIVersion)
			if err := got.ReadFrom(body); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if string(got.AppendTo(nil)) != string(want.AppendTo(nil)) {
				t.Fatal("body differs after round trip")
			}
		})
	}
}

func TestAppendAPIVersionsUnsupported(t *testing.T) {
	keys := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 3, MaxVersion: 11}, {ApiKey: 18, MaxVersion: 3}}
	out := AppendAPIVersionsUnsupported(nil, 99, keys...)
	if int(binary.BigEndian.Uint32(out)) != len(out)-4 || binary.BigEndian.Uint32(out[4:]) != 99 {
		t.Fatal("frame header")
	}
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = 0
	if err := r.ReadFrom(out[8:]); err != nil {
		t.Fatal(err)
	}
	if r.ErrorCode != kerr.UnsupportedVersion.Code || len(r.ApiKeys) != 2 || r.ApiKeys[1].ApiKey != 18 || r.ApiKeys[1].MaxVersion != 3 {
		t.Fatalf("%+v", r)
	}
}

// miniBroker answers ApiVersions (max v3, so newer clients get
// UNSUPPORTED_VERSION first) and Metadata over a real socket using this
// package's framing, header parsing and response encoding.
type miniBroker struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []RequestHeader
	wg   sync.WaitGroup
}

func startMiniBroker(t *testing.T) *miniBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	b := &miniBroker{ln: ln}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				b.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		b.wg.Wait()
	})
	return b
}

var miniKeys = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: 3, MinVersion: 0, MaxVersion: 12},
	{ApiKey: 18, MinVersion: 0, MaxVersion: 3},
}

func (b *miniBroker) serve(c net.Conn) {
	defer c.Close()
	host, portStr, _ := net.SplitHostPort(b.ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	fr := NewFrameReader(0, nil)
	buf := make([]byte, 4096)
	var out []byte
	for {
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return
		}
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		out = out[:0]
		_, ferr := fr.Feed(buf[:n], func(frame []byte) error {
			h, _, err := ParseRequestHeader(frame)
			b.mu.Lock()
			b.seen = append(b.seen, h)
			b.mu.Unlock()
			switch {
			case h.APIKey == 18 && (errors.Is(err, ErrUnsupportedVersion) || h.APIVersion > 3):
				out = AppendAPIVersionsUnsupported(out, h.CorrelationID, miniKeys...)
			case err != nil:
				return err
			case h.APIKey == 18:
				r := kmsg.NewPtrApiVersionsResponse()
				r.ApiKeys = miniKeys
				out = AppendResponse(out, h, r)
			case h.APIKey == 3:
				r := kmsg.NewPtrMetadataResponse()
				r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: host, Port: int32(port)}}
				r.ControllerID = 1
				out = AppendResponse(out, h, r)
			default:
				return errors.New("unexpected request")
			}
			return nil
		})
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
		if ferr != nil {
			return
		}
	}
}

// TestFranzGoClientHandshake drives a real franz-go client through the
// ApiVersions downgrade and a flexible Metadata request.
func TestFranzGoClientHandshake(t *testing.T) {
	b := startMiniBroker(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var sawUnsupported, sawMeta bool
	for _, h := range b.seen {
		if h.APIKey == 18 && h.APIVersion > 3 {
			sawUnsupported = true
		}
		if h.APIKey == 3 && h.APIVersion == 12 && h.Flexible && h.ClientID == "kgo" {
			sawMeta = true
		}
	}
	if !sawUnsupported || !sawMeta {
		t.Fatalf("requests seen: %+v", b.seen)
	}
}
