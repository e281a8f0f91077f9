package wire

import (
	"fmt"
	"testing"
)

// BenchmarkFetchWriter builds a v16 response of 4 topics x 8 partitions,
// each with two 64 KiB record chunks referenced, not copied.
func BenchmarkFetchWriter(b *testing.B) {
	chunk := make([]byte, 64<<10)
	var topics []fetchTopicCase
	for ti := range 4 {
		tc := fetchTopicCase{name: fmt.Sprintf("topic-%d", ti), id: [16]byte{byte(ti)}}
		for p := range 8 {
			fp := NewFetchPartition(int32(p))
			fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = 1000, 1000, 0
			tc.parts = append(tc.parts, fetchCase{fp, [][]byte{chunk, chunk}})
		}
		topics = append(topics, tc)
	}
	var w FetchWriter
	writeFetch(b, &w, 16, topics, nil)
	b.SetBytes(int64(w.Size()))
	b.ReportAllocs()
	for b.Loop() {
		writeFetch(b, &w, 16, topics, nil)
	}
}
