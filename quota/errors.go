package quota

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is a Kafka error code with the message Kafka sends beside it in DescribeClientQuotas
// and AlterClientQuotas responses (ApiError's code and message). errors.Is(err,
// kerr.InvalidRequest) and friends match it through Unwrap.
type Error struct {
	// Code is the Kafka error the broker answers with.
	Code *kerr.Error
	// Message is Kafka's error message, sent as the response's error_message.
	Message string
}

// Error gives the code's name and the message.
func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code.Message, e.Message) }

// Unwrap returns the Kafka error code.
func (e *Error) Unwrap() error { return e.Code }

// invalidRequest is an INVALID_REQUEST (42) with Kafka's message.
func invalidRequest(format string, args ...any) *Error {
	return &Error{Code: kerr.InvalidRequest, Message: fmt.Sprintf(format, args...)}
}
