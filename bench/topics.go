package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// pollEvery is how often bounded waits re-check their condition.
const pollEvery = 50 * time.Millisecond

// waitFor calls cond every pollEvery until it returns true, it returns an
// error, ctx is done or timeout passes. The error names what was awaited.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last error
	for {
		ok, err := cond(ctx)
		if err != nil {
			last = err
		} else if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("wait for %s after %v: %w (last error: %w)", what, timeout, ctx.Err(), last)
			}
			return fmt.Errorf("wait for %s after %v: %w", what, timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// createTopics creates the run's topics and waits until every partition has a
// leader, so that the first produce does not measure topic creation.
func createTopics(ctx context.Context, adm *kadm.Client, topics []string, partitions, replication int, timeout time.Duration) error {
	// A broker that is still starting refuses connections: retry the request
	// (not a topic's error) until the setup timeout.
	var resp kadm.CreateTopicResponses
	err := waitFor(ctx, timeout, fmt.Sprintf("create topics %v", topics), func(ctx context.Context) (bool, error) {
		var err error
		resp, err = adm.CreateTopics(ctx, int32(partitions), int16(replication), nil, topics...)
		return err == nil, err
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("create topic %s (partitions=%d, replication=%d): %w", r.Topic, partitions, replication, r.Err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return waitFor(ctx, timeout, fmt.Sprintf("leaders of %d topics", len(topics)), func(ctx context.Context) (bool, error) {
		md, err := adm.Metadata(ctx, topics...)
		if err != nil {
			return false, err
		}
		for _, t := range topics {
			td, ok := md.Topics[t]
			if !ok || td.Err != nil || len(td.Partitions) != partitions {
				return false, nil
			}
			for _, p := range td.Partitions {
				if p.Err != nil || p.Leader < 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// endOffsets returns the current end offset of every partition of topics, the
// point from which consumers read. In a cluster a new partition's leader may
// not know it leads yet when another broker's metadata already names it
// (NOT_LEADER_FOR_PARTITION): the listing is retried until timeout.
func endOffsets(ctx context.Context, adm *kadm.Client, topics []string, timeout time.Duration) (kadm.ListedOffsets, error) {
	var offs kadm.ListedOffsets
	err := waitFor(ctx, timeout, fmt.Sprintf("end offsets of %v", topics), func(ctx context.Context) (bool, error) {
		var err error
		if offs, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return false, err
		}
		return offs.Error() == nil, offs.Error()
	})
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	return offs, nil
}

// deleteTopics removes the run's topics.
func deleteTopics(ctx context.Context, adm *kadm.Client, topics []string) error {
	resp, err := adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	var errs []error
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("delete topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}
