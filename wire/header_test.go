package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAPITableCoversKmsg(t *testing.T) {
	for k := maxAPIKeys; k < 4096; k++ {
		if kmsg.RequestForKey(int16(k)) != nil {
			t.Fatalf("kmsg knows api key %d, above maxAPIKeys %d", k, maxAPIKeys)
		}
	}
	if MaxVersion(-1) != -1 || MaxVersion(maxAPIKeys) != -1 || IsFlexible(-5, 3) {
		t.Fatal("out of range keys must be unknown")
	}
}

// TestParseRequestHeaderAllAPIs frames every version of every kmsg request
// with kmsg's own formatter and parses it back.
func TestParseRequestHeaderAllAPIs(t *testing.T) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("client-1"))
	n := 0
	for k := int16(0); k < maxAPIKeys; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			if k == apiKeyControlledShutdown && v == 0 {
				continue // kmsg's formatter omits the body here; see TestParseRequestHeaderV0
			}
			req.SetVersion(v)
			frame := f.AppendRequest(nil, req, int32(k)*1000+int32(v))[4:]
			h, body, err := ParseRequestHeader(frame)
			if err != nil {
				t.Fatalf("key %d v%d: %v", k, v, err)
			}
			want := RequestHeader{APIKey: k, APIVersion: v, CorrelationID: int32(k)*1000 + int32(v),
				ClientID: "client-1", Flexible: req.IsFlexible()}
			if h != want {
				t.Fatalf("key %d v%d: header %+v, want %+v", k, v, h, want)
			}
			if IsFlexible(k, v) != req.IsFlexible() {
				t.Fatalf("key %d v%d: IsFlexible disagrees with kmsg", k, v)
			}
			if !bytes.Equal(body, req.AppendTo(nil)) {
				t.Fatalf("key %d v%d: body differs", k, v)
			}
			n++
		}
	}
	if n < 300 {
		t.Fatalf("only %d key/version pairs checked", n)
	}
}

func TestParseRequestHeaderV0(t *testing.T) {
	frame := []byte{0, 7, 0, 0, 0, 0, 0, 42, 0, 0, 0, 9}
	h, body, err := ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.APIKey != 7 || h.APIVersion != 0 || h.CorrelationID != 42 || h.ClientID != "" {
		t.Fatalf("header %+v", h)
	}
	if !bytes.Equal(body, []byte{0, 0, 0, 9}) {
		t.Fatalf("body %v", body)
	}
}

// rawHeader builds a header by hand: v1 when tags is nil, else v2 with
// the given raw tag section.
func rawHeader(key, version int16, corr int32, clientID *string, tags []byte, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xFFFF)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
		b = append(b, *clientID...)
	}
	b = append(b, tags...)
	return append(b, body...)
}

func TestParseRequestHeaderCases(t *testing.T) {
	cid := "abc"
	tests := []struct {
		name     string
		frame    []byte
		wantH    RequestHeader
		wantBody []byte
		wantErr  error
	}{
		{
			name:     "null client id",
			frame:    rawHeader(3, 4, 9, nil, nil, []byte{1, 2}),
			wantH:    RequestHeader{APIKey: 3, APIVersion: 4, CorrelationID: 9},
			wantBody: []byte{1, 2},
		},
		{
			name: "tagged fields skipped",
			// Metadata v9 is flexible: two tags (0: 3 bytes, 5: 0 bytes).
			frame:    rawHeader(3, 9, 1, &cid, []byte{2, 0, 3, 7, 7, 7, 5, 0}, []byte{9}),
			wantH:    RequestHeader{APIKey: 3, APIVersion: 9, CorrelationID: 1, ClientID: "abc", Flexible: true},
			wantBody: []byte{9},
		},
		{
			name:    "unknown key",
			frame:   rawHeader(999, 1, 77, &cid, nil, nil),
			wantH:   RequestHeader{APIKey: 999, APIVersion: 1, CorrelationID: 77},
			wantErr: ErrUnknownAPIKey,
		},
		{
			name:     "api versions above max is flexible",
			frame:    rawHeader(18, 99, 5, &cid, []byte{0}, []byte{4}),
			wantH:    RequestHeader{APIKey: 18, APIVersion: 99, CorrelationID: 5, ClientID: "abc", Flexible: true},
			wantBody: []byte{4},
			wantErr:  ErrUnsupportedVersion,
		},
		{
			name:    "api versions above max with garbage header",
			frame:   []byte{0, 18, 0, 99, 0, 0, 0, 5, 0x7F},
			wantH:   RequestHeader{APIKey: 18, APIVersion: 99, CorrelationID: 5, Flexible: true},
			wantErr: ErrUnsupportedVersion,
		},
		{
			name:    "negative version",
			frame:   rawHeader(0, -1, 5, &cid, nil, nil),
			wantH:   RequestHeader{APIKey: 0, APIVersion: -1, CorrelationID: 5, ClientID: "abc"},
			wantErr: ErrUnsupportedVersion,
		},
		{name: "short", frame: []byte{0, 3, 0, 1, 0, 0, 0}, wantErr: ErrTruncated},
		{name: "client id too long", frame: []byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 9, 'a'},
			wantH: RequestHeader{APIKey: 3, APIVersion: 1, CorrelationID: 1}, wantErr: ErrTruncated},
		{name: "client id negative", frame: []byte{0, 3, 0, 1, 0, 0, 0, 1, 0xFF, 0xF0},
			wantH: RequestHeader{APIKey: 3, APIVersion: 1, CorrelationID: 1}, wantErr: ErrTruncated},
		{name: "tag size beyond frame", frame: rawHeader(3, 9, 1, nil, []byte{1, 0, 50, 1}, nil),
			wantH: RequestHeader{APIKey: 3, APIVersion: 9, CorrelationID: 1, Flexible: true}, wantErr: ErrTruncated},
		{name: "tag count beyond frame", frame: rawHeader(3, 9, 1, nil, []byte{0x80, 0x80, 0x80, 0x80, 0x0F}, nil),
			wantH: RequestHeader{APIKey: 3, APIVersion: 9, CorrelationID: 1, Flexible: true}, wantErr: ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, body, err := ParseRequestHeader(tt.frame)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if h != tt.wantH {
				t.Fatalf("header %+v, want %+v", h, tt.wantH)
			}
			if tt.wantBody != nil && !bytes.Equal(body, tt.wantBody) {
				t.Fatalf("body %v, want %v", body, tt.wantBody)
			}
		})
	}
}

func TestUnsupportedRequestErrorFields(t *testing.T) {
	_, _, err := ParseRequestHeader(rawHeader(18, 42, 1234, nil, []byte{0}, nil))
	var ue *UnsupportedRequestError
	if !errors.As(err, &ue) {
		t.Fatalf("err %T %v", err, err)
	}
	if ue.APIKey != 18 || ue.APIVersion != 42 || ue.CorrelationID != 1234 || ue.MaxVersion != MaxVersion(18) {
		t.Fatalf("%+v", ue)
	}
	if ErrorCode(err) != 35 {
		t.Fatalf("ErrorCode = %d, want 35", ErrorCode(err))
	}
}

func TestParseRequestHeaderNoAllocs(t *testing.T) {
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, kmsg.NewPtrFetchRequest(), 1)[4:]
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := ParseRequestHeader(frame); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per parse", allocs)
	}
}

// FuzzRequestHeader checks that any input parses or fails without panic,
// and that a parsed body is a suffix of the frame.
func FuzzRequestHeader(f *testing.F) {
	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	f.Add(fm.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)[4:])
	f.Add(fm.AppendRequest(nil, kmsg.NewPtrProduceRequest(), 2)[4:])
	f.Add(rawHeader(3, 9, 1, nil, []byte{2, 0, 3, 7, 7, 7, 5, 0}, []byte{9}))
	f.Add([]byte{0, 7, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0, 18, 0x7F, 0, 0, 0, 0, 1, 0xFF})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, body, err := ParseRequestHeader(frame)
		if len(frame) >= headerFixedBytes && h.CorrelationID != int32(binary.BigEndian.Uint32(frame[4:])) {
			t.Fatalf("correlation id not parsed")
		}
		if err == nil && !bytes.HasSuffix(frame, body) {
			t.Fatalf("body is not a suffix of the frame")
		}
	})
}
