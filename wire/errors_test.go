package wire

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int16
	}{
		{"nil", nil, 0},
		{"batch error", batchErr(0, 0, kerr.InvalidRecord, "x", 1, 2), kerr.InvalidRecord.Code},
		{"wrapped kerr", fmt.Errorf("ctx: %w", kerr.MessageTooLarge), kerr.MessageTooLarge.Code},
		{"unsupported version", &UnsupportedRequestError{APIKey: 1, APIVersion: 99, MaxVersion: 18}, kerr.UnsupportedVersion.Code},
		{"unknown key", &UnsupportedRequestError{APIKey: 999, MaxVersion: -1}, kerr.InvalidRequest.Code},
		{"unknown codec", fmt.Errorf("x: %w", ErrUnknownCodec), kerr.UnsupportedCompressionType.Code},
		{"truncated", fmt.Errorf("x: %w", ErrTruncated), kerr.CorruptMessage.Code},
	}
	for _, tt := range tests {
		if got := ErrorCode(tt.err); got != tt.want {
			t.Errorf("%s: code %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestErrorMessagesCarryValues checks messages name the offending values.
func TestErrorMessagesCarryValues(t *testing.T) {
	tests := []struct {
		err   error
		wants []string
	}{
		{batchErr(3, 4096, kerr.CorruptMessage, "crc32c mismatch", 123, 456), []string{"batch 3", "byte 4096", "crc32c mismatch", "123", "456"}},
		{&UnsupportedRequestError{APIKey: 1, APIVersion: 99, CorrelationID: 7, MaxVersion: 18}, []string{"key 1", "version 99", "max 18", "correlation id 7"}},
		{&UnsupportedRequestError{APIKey: 999, APIVersion: 2, CorrelationID: 8, MaxVersion: -1}, []string{"999", "unknown api key", "correlation id 8"}},
	}
	for _, tt := range tests {
		msg := tt.err.Error()
		for _, w := range tt.wants {
			if !strings.Contains(msg, w) {
				t.Errorf("%q lacks %q", msg, w)
			}
		}
	}
	if !errors.Is(&UnsupportedRequestError{MaxVersion: -1}, ErrUnknownAPIKey) || errors.Is(&UnsupportedRequestError{MaxVersion: 3}, ErrUnknownAPIKey) {
		t.Fatal("Is mismatch")
	}
}
