package broker

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"ringbroker/broker/meta"
)

// metaSimSeeds and metaSimSteps size TestMetadataSim.
const (
	metaSimSeeds = 400
	metaSimSteps = 400
)

// TestMetadataSim drives partition state through the records the brokers and the controller
// really propose, from views of the metadata log that lag it by random amounts: leaders shrink
// and grow ISRs from stale images, the controller fences crashed brokers (by session timeout
// or a refused connection) and records controlled shutdowns, brokers restart with new
// incarnations. The log is the Raft order of entries; an entry that does not apply to the
// image before it is skipped, as on every node. After every entry it checks: the ISR is a
// non-empty subset of the replicas holding the leader; a partition's epoch grows by one with
// each change and its leader epoch with each leader change; a new leader comes from the ISR
// before it; no fenced or stopping broker leads; no broker in controlled shutdown joins an ISR.
// Operators set and remove dynamic broker configs meanwhile. At the end it replays the encoded
// log from scratch to the same image, entry by entry (apply is a function of the log alone,
// and a published image's broker configs never change afterwards), then heals every fault and checks every partition gets a leader and its
// full ISR back.
func TestMetadataSim(t *testing.T) {
	var applied, skipped, fences, shutdowns, elections int
	for seed := range uint64(metaSimSeeds) {
		s := newMetaSim(seed)
		if err := s.run(); err != nil {
			tail := s.trace[max(0, len(s.trace)-30):]
			t.Fatalf("seed %d: %v\nlast events:\n%s", seed, err, fmt.Sprint(tail))
		}
		applied, skipped = applied+s.applied, skipped+s.skipped
		for i, recs := range s.entries {
			if s.images[i+1] == s.images[i] {
				continue
			}
			for _, r := range recs {
				switch {
				case r.Type == meta.TypeFence && r.Fenced:
					fences++
				case r.Type == meta.TypeControlledShutdown:
					shutdowns++
				case r.Type == meta.TypePartition && i > 0 && r.Leader != s.images[i].TopicsByID[r.TopicID].Partitions[r.Partition].Leader:
					elections++
				}
			}
		}
	}
	t.Logf("%d seeds: %d entries applied, %d skipped as stale or ineligible; %d fences, %d controlled shutdowns, %d leader changes",
		metaSimSeeds, applied, skipped, fences, shutdowns, elections)
	if skipped == 0 || fences == 0 || shutdowns == 0 || elections == 0 {
		t.Fatal("the simulation did not reach stale proposals, fences, controlled shutdowns and elections")
	}
}

// metaSim is one seeded run: the committed log, the image after each entry, and the brokers.
type metaSim struct {
	rng     *rand.Rand
	now     time.Time
	entries [][]meta.Record
	images  []*meta.Image // images[i] is the image after the first i entries
	views   map[int32]int // how many entries each broker has applied
	alive   map[int32]bool
	stop    map[int32]bool // asked for a controlled shutdown
	lastHB  map[int32]time.Time
	refused map[int32]meta.Heartbeat
	trace   []string
	// applied and skipped count the entries that applied and those that did not.
	applied, skipped int
}

const metaSimBrokers = 4

func newMetaSim(seed uint64) *metaSim {
	s := &metaSim{rng: rand.New(rand.NewPCG(seed, 0x5eed)), now: time.Unix(1_000_000, 0),
		views: map[int32]int{}, alive: map[int32]bool{}, stop: map[int32]bool{}, lastHB: map[int32]time.Time{},
		refused: map[int32]meta.Heartbeat{}}
	s.images = []*meta.Image{meta.EmptyImage("sim")}
	var recs []meta.Record
	for n := int32(1); n <= metaSimBrokers; n++ {
		recs = append(recs, meta.Record{Type: meta.TypeBroker, NodeID: n, Incarnation: meta.NewUUID()})
		s.alive[n], s.lastHB[n] = true, s.now
	}
	tid := meta.NewUUID()
	recs = append(recs, meta.Record{Type: meta.TypeTopic, TopicName: "t", TopicID: tid})
	for p := int32(0); p < metaSimBrokers; p++ {
		reps := []int32{p%metaSimBrokers + 1, (p+1)%metaSimBrokers + 1, (p+2)%metaSimBrokers + 1}
		recs = append(recs, meta.Record{Type: meta.TypePartition, TopicID: tid, Partition: p, Replicas: reps, ISR: reps, Leader: reps[0]})
	}
	s.commit("setup", recs)
	for n := int32(1); n <= metaSimBrokers; n++ {
		s.views[n] = len(s.entries)
	}
	return s
}

func (s *metaSim) head() *meta.Image { return s.images[len(s.images)-1] }

// view is what broker n has applied.
func (s *metaSim) view(n int32) *meta.Image { return s.images[s.views[n]] }

func (s *metaSim) run() error {
	for range metaSimSteps {
		if err := s.step(); err != nil {
			return err
		}
	}
	if err := s.replay(); err != nil {
		return err
	}
	return s.heal()
}

// step runs one random event.
func (s *metaSim) step() error {
	s.now = s.now.Add(time.Duration(s.rng.IntN(3000)) * time.Millisecond)
	for n, up := range s.alive {
		if up {
			s.lastHB[n] = s.now
		}
	}
	n := int32(s.rng.IntN(metaSimBrokers) + 1)
	switch r := s.rng.IntN(100); {
	case r < 25:
		return s.leaderISRChange(n)
	case r < 50:
		return s.controller()
	case r < 70:
		s.views[n] += s.rng.IntN(len(s.entries) - s.views[n] + 1)
	case r < 80:
		if s.alive[n] {
			s.alive[n] = false
			s.logf("crash %d", n)
			if s.rng.IntN(2) == 0 {
				// Its peers find its endpoint refusing connections.
				s.refused[n] = meta.Heartbeat{Incarnation: s.head().Brokers[n].Incarnation, At: s.now}
			}
		}
	case r < 90:
		if !s.alive[n] {
			s.alive[n], s.stop[n], s.lastHB[n] = true, false, s.now
			s.views[n] = 0 // replays its metadata log from the start, catching up below
			return s.commit(fmt.Sprintf("restart %d", n), []meta.Record{{Type: meta.TypeBroker, NodeID: n, Incarnation: meta.NewUUID()}})
		}
	case r < 95:
		// An operator's dynamic broker config change: a throttle rate set or removed, for
		// broker n or for all.
		res := []string{"", fmt.Sprint(n)}[s.rng.IntN(2)]
		rec := meta.Record{Type: meta.TypeBrokerConfig, ConfigResource: res, ConfigKey: "leader.replication.throttled.rate"}
		if s.rng.IntN(2) == 0 {
			rec.ConfigValue = new(string)
			*rec.ConfigValue = fmt.Sprint(s.rng.IntN(1 << 20))
		}
		return s.commit(fmt.Sprintf("broker config %q", res), []meta.Record{rec})
	default:
		if s.alive[n] {
			s.stop[n] = true
			s.logf("controlled shutdown requested by %d", n)
		}
	}
	return nil
}

// leaderISRChange has broker n, as the leader its view names, shrink or grow one ISR from that
// view, as shrinkISRs and followerFetched do.
func (s *metaSim) leaderISRChange(n int32) error {
	if !s.alive[n] {
		return nil
	}
	v := s.view(n)
	t := v.Topics["t"]
	if t == nil {
		return nil // a restarted broker that has not replayed the topic yet
	}
	p := t.Partitions[s.rng.IntN(len(t.Partitions))]
	if p.Leader != n {
		return nil
	}
	isr := slices.Clone(p.ISR)
	if s.rng.IntN(2) == 0 && len(isr) > 1 {
		drop := isr[s.rng.IntN(len(isr))]
		if drop == n {
			return nil
		}
		isr = slices.DeleteFunc(isr, func(r int32) bool { return r == drop })
	} else {
		var out []int32
		for _, r := range p.Replicas {
			if br := v.Brokers[r]; !p.InISR(r) && !br.Fenced && !br.InControlledShutdown {
				out = append(out, r)
			}
		}
		if len(out) == 0 {
			return nil
		}
		isr = append(isr, out[s.rng.IntN(len(out))])
	}
	return s.commit(fmt.Sprintf("leader %d changes ISR of %d to %v (view %d)", n, p.Index, isr, s.views[n]), []meta.Record{p.Next(t.ID, n, p.LeaderEpoch, isr)})
}

// controller runs the active controller's check on the head image, as controllerCheck does.
func (s *metaSim) controller() error {
	im := s.head()
	hbs := map[int32]meta.Heartbeat{}
	for n, br := range im.Brokers {
		hbs[n] = meta.Heartbeat{Incarnation: br.Incarnation, At: s.lastHB[n], WantShutdown: s.stop[n] && s.alive[n]}
	}
	dead := deadBrokers(im, s.refused, hbs)
	recs := fenceRecords(im, hbs, dead, s.now.Add(-time.Hour), s.now, 9*time.Second, func(*meta.Topic) bool { return false })
	if len(recs) == 0 {
		return nil
	}
	return s.commit("controller", recs)
}

// commit appends an entry to the log and checks the image it makes.
func (s *metaSim) commit(what string, recs []meta.Record) error {
	// Entries travel encoded, as in the Raft log.
	data, err := meta.EncodeRecords(recs)
	if err != nil {
		return err
	}
	if recs, err = meta.DecodeRecords(data); err != nil {
		return err
	}
	prev := s.head()
	s.entries = append(s.entries, recs)
	next, err := prev.Apply(int64(len(s.entries)), recs)
	if err != nil {
		s.logf("%s: skipped: %v", what, err)
		s.skipped++
		s.images = append(s.images, prev)
		return nil
	}
	s.logf("%s: applied %d records", what, len(recs))
	s.applied++
	s.images = append(s.images, next)
	if err := checkTransition(prev, next); err != nil {
		return fmt.Errorf("entry %d (%s): %w", len(s.entries), what, err)
	}
	return nil
}

// checkTransition checks the partition invariants from image prev to next.
func checkTransition(prev, next *meta.Image) error {
	for _, t := range next.Topics {
		old := prev.TopicsByID[t.ID]
		for _, p := range t.Partitions {
			if len(p.ISR) == 0 || slices.ContainsFunc(p.ISR, func(r int32) bool { return !slices.Contains(p.Replicas, r) }) ||
				len(slices.Compact(slices.Sorted(slices.Values(p.ISR)))) != len(p.ISR) {
				return fmt.Errorf("partition %d: ISR %v not a non-empty set within replicas %v", p.Index, p.ISR, p.Replicas)
			}
			if p.Leader >= 0 {
				br := next.Brokers[p.Leader]
				if !p.InISR(p.Leader) || br.Fenced || br.InControlledShutdown {
					return fmt.Errorf("partition %d: leader %d (%+v) outside ISR %v, fenced or stopping", p.Index, p.Leader, br, p.ISR)
				}
			}
			if old == nil || int(p.Index) >= len(old.Partitions) {
				continue
			}
			o := old.Partitions[p.Index]
			changed := o.Leader != p.Leader || o.LeaderEpoch != p.LeaderEpoch || !slices.Equal(o.ISR, p.ISR) || !slices.Equal(o.Replicas, p.Replicas)
			switch {
			case changed && p.PartitionEpoch != o.PartitionEpoch+1:
				return fmt.Errorf("partition %d changed from epoch %d to %d", p.Index, o.PartitionEpoch, p.PartitionEpoch)
			case !changed && p.PartitionEpoch != o.PartitionEpoch && p.PartitionEpoch != o.PartitionEpoch+1:
				return fmt.Errorf("partition %d unchanged, epoch %d to %d", p.Index, o.PartitionEpoch, p.PartitionEpoch)
			case p.LeaderEpoch < o.LeaderEpoch || (p.Leader != o.Leader && p.LeaderEpoch == o.LeaderEpoch):
				return fmt.Errorf("partition %d: leader %d@%d after %d@%d", p.Index, p.Leader, p.LeaderEpoch, o.Leader, o.LeaderEpoch)
			case p.Leader >= 0 && p.Leader != o.Leader && !o.InISR(p.Leader):
				return fmt.Errorf("partition %d: leader %d elected from outside the ISR %v", p.Index, p.Leader, o.ISR)
			}
			for _, r := range p.ISR {
				if !o.InISR(r) && next.Brokers[r].InControlledShutdown {
					return fmt.Errorf("partition %d: broker %d in controlled shutdown joined the ISR", p.Index, r)
				}
			}
		}
	}
	return nil
}

// replay applies the whole log again to an empty image, skipping what does not apply, and
// compares the outcome with the head image.
func (s *metaSim) replay() error {
	im := meta.EmptyImage("sim")
	for i, recs := range s.entries {
		if next, err := im.Apply(int64(i+1), recs); err == nil {
			im = next
		}
		// Images once published never change: the dynamic broker configs of each one are
		// still what replaying up to it gives.
		if !reflect.DeepEqual(im.BrokerConfigs, s.images[i+1].BrokerConfigs) {
			return fmt.Errorf("after entry %d: replayed broker configs %v, the image published then holds %v", i, im.BrokerConfigs, s.images[i+1].BrokerConfigs)
		}
	}
	got, want := *im, *s.head()
	got.Offset, want.Offset = 0, 0
	if !reflect.DeepEqual(got.Topics, want.Topics) || !reflect.DeepEqual(got.Brokers, want.Brokers) {
		return fmt.Errorf("replaying the log gives another image:\n%+v\nwant\n%+v", got, want)
	}
	return nil
}

// heal restarts every broker, lets the controller and the leaders act from the head image,
// and checks every partition ends with a leader and all replicas in sync.
func (s *metaSim) heal() error {
	for n := int32(1); n <= metaSimBrokers; n++ {
		if !s.alive[n] || s.stop[n] {
			s.alive[n], s.stop[n] = true, false
			if err := s.commit(fmt.Sprintf("heal: restart %d", n), []meta.Record{{Type: meta.TypeBroker, NodeID: n, Incarnation: meta.NewUUID()}}); err != nil {
				return err
			}
		}
	}
	for range 20 {
		s.now = s.now.Add(time.Second)
		for n := range s.alive {
			s.lastHB[n], s.views[n] = s.now, len(s.entries)
		}
		if err := s.controller(); err != nil {
			return err
		}
		for n := int32(1); n <= metaSimBrokers; n++ {
			s.views[n] = len(s.entries)
			v := s.view(n)
			t := v.Topics["t"]
			for _, p := range t.Partitions {
				if p.Leader == n && len(p.ISR) < len(p.Replicas) {
					if err := s.commit(fmt.Sprintf("heal: leader %d grows ISR of %d", n, p.Index), []meta.Record{p.Next(t.ID, n, p.LeaderEpoch, p.Replicas)}); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, p := range s.head().Topics["t"].Partitions {
		if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
			return fmt.Errorf("after healing, partition %d: leader %d, ISR %v of replicas %v", p.Index, p.Leader, p.ISR, p.Replicas)
		}
	}
	return nil
}

func (s *metaSim) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%s "+format+"\n", append([]any{s.now.Format("15:04:05.000")}, args...)...))
}
