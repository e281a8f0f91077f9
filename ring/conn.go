package ring

import "sync/atomic"

// handlerContext holds what a Handler stores with Conn.SetContext; both backends' connections
// embed it. Context is read on every OnData, so it is an atomic load rather than a lock.
type handlerContext struct{ v atomic.Pointer[any] }

// SetContext implements Conn.
func (h *handlerContext) SetContext(v any) { h.v.Store(&v) }

// Context implements Conn.
func (h *handlerContext) Context() any {
	if p := h.v.Load(); p != nil {
		return *p
	}
	return nil
}
