package broker

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// maxAutoCreatePending bounds the topic names waiting for auto-creation: a client naming
// ever new topics in Metadata requests cannot queue unbounded work; past it a name is
// answered UNKNOWN_TOPIC_OR_PARTITION and created when asked for again.
const maxAutoCreatePending = 1024

// autoCreator creates the topics Metadata requests name without waiting for them, as Kafka's
// AutoTopicCreationManager under KRaft: the request that triggers a creation is answered
// UNKNOWN_TOPIC_OR_PARTITION, like any request while the creation is under way, and the client
// asks again. Clients and test suites written against Kafka expect that answer (kafka-go's
// reads a deleted topic's partitions back as none). One goroutine at a time works through the
// queued names, so creations hold no handler worker.
type autoCreator struct {
	mu sync.Mutex
	// pending are the names queued or being created; queue the ones not yet taken.
	pending map[string]bool
	queue   []topicSpec
	running bool
}

// autoCreate queues specs for creation, skipping names already pending, and starts the
// creating goroutine if none runs.
func (b *Broker) autoCreate(specs []topicSpec) {
	a := &b.autoCreates
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range specs {
		if a.pending[s.name] || len(a.pending) >= maxAutoCreatePending {
			continue
		}
		if a.pending == nil {
			a.pending = make(map[string]bool)
		}
		a.pending[s.name] = true
		a.queue = append(a.queue, s)
	}
	if len(a.queue) > 0 && !a.running && !b.closing.Load() {
		a.running = true
		b.bg.Add(1)
		go b.runAutoCreates()
	}
}

// runAutoCreates creates the queued topics, a batch at a time, until the queue is empty or
// the broker shuts down.
func (b *Broker) runAutoCreates() {
	defer b.bg.Done()
	a := &b.autoCreates
	for {
		a.mu.Lock()
		batch := a.queue
		a.queue = nil
		if len(batch) == 0 || b.closing.Load() {
			for _, s := range batch {
				delete(a.pending, s.name)
			}
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		for i, res := range b.createTopics(batch, false) {
			if res.err != nil && res.err != kerr.TopicAlreadyExists {
				b.logger.Warn("auto-create topic", "topic", batch[i].name, "err", res.err.Message, "detail", res.message)
			}
		}
		a.mu.Lock()
		for _, s := range batch {
			delete(a.pending, s.name)
		}
		a.mu.Unlock()
	}
}
