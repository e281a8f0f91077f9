package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// Consumer group tests: Apache Kafka's Java consumer (classic and KIP-848 protocols),
// franz-go group consumers and kcat -G, each in a group of three on a 12-partition topic
// with one member killed mid-run, plus Kafka's ConsumerGroupCommand and bad group input.

const (
	groupPartitions = 12
	// groupSession is the session timeout of every group test, classic (client setting)
	// and KIP-848 (broker setting), and groupHeartbeat the heartbeat interval.
	groupSession   = 6 * time.Second
	groupHeartbeat = 500 * time.Millisecond
	// takeoverSlack is how long after the session timeout the survivors of a killed
	// member may take to own its partitions: a few heartbeats, a rejoin and a poll.
	takeoverSlack = 6 * time.Second
	// groupWait bounds waiting for a group to form or to consume what was produced.
	groupWait = 60 * time.Second
)

// groupOverrides are the broker settings of the group tests; Apache Kafka accepts them
// too. The initial rebalance delay is off and __consumer_offsets small to keep it fast.
func groupOverrides() []string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return []string{
		"group.initial.rebalance.delay.ms=0",
		"offsets.topic.num.partitions=4",
		"group.consumer.heartbeat.interval.ms=" + ms(groupHeartbeat),
		"group.consumer.min.heartbeat.interval.ms=" + ms(groupHeartbeat),
		"group.consumer.session.timeout.ms=" + ms(groupSession),
		"group.consumer.min.session.timeout.ms=" + ms(groupSession),
	}
}

// groupTarget is the one broker configuration the group tests run on: coordination does
// not depend on the I/O backend, which the other e2e tests cover both of.
func groupTarget(t *testing.T) target {
	t.Helper()
	return targets(t)[0]
}

// ownership tracks, from members' reports, which partitions each member owns and what
// each consumed; it fails the test when two members own a partition in one generation.
type ownership struct {
	t  testing.TB
	mu sync.Mutex
	// owned is each member's latest assignment; gens the union of what each member
	// owned during each generation (classic protocol).
	owned map[string]map[int32]bool
	gens  map[int32]map[string]map[int32]bool
	// consumed counts deliveries per partition and offset; by member too.
	consumed map[int32]map[int64]int
	byMember map[string]map[int32][]int64
	closed   map[string]bool
	// realTime, when set, also requires that no two members ever own a partition at
	// the same moment (clients in one process report in real time).
	realTime bool
	errs     []string
	// fatal are problems (a member process died) that end any wait at once.
	fatal []string
}

func newOwnership(t testing.TB, realTime bool) *ownership {
	return &ownership{t: t, owned: map[string]map[int32]bool{}, gens: map[int32]map[string]map[int32]bool{},
		consumed: map[int32]map[int64]int{}, byMember: map[string]map[int32][]int64{}, closed: map[string]bool{}, realTime: realTime}
}

// assign records that member owns exactly ps in generation gen (gen < 0: unknown).
func (o *ownership) assign(member string, gen int32, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	set := map[int32]bool{}
	for _, p := range ps {
		set[p] = true
		if o.realTime {
			for other, os := range o.owned {
				if other != member && os[p] {
					o.errs = append(o.errs, fmt.Sprintf("partition %d owned by %s and %s at once (generation %d)", p, other, member, gen))
				}
			}
		}
	}
	o.owned[member] = set
	if gen < 0 {
		return
	}
	g := o.gens[gen]
	if g == nil {
		g = map[string]map[int32]bool{}
		o.gens[gen] = g
	}
	if g[member] == nil {
		g[member] = map[int32]bool{}
	}
	for p := range set {
		g[member][p] = true
		for other, os := range g {
			if other != member && os[p] {
				o.errs = append(o.errs, fmt.Sprintf("partition %d owned by %s and %s in generation %d", p, other, member, gen))
			}
		}
	}
}

// gone records that member died or left: it owns nothing any more.
func (o *ownership) gone(member string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.owned, member)
	o.closed[member] = true
}

func (o *ownership) record(member string, p int32, offset int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.consumed[p] == nil {
		o.consumed[p] = map[int64]int{}
	}
	o.consumed[p][offset]++
	if o.byMember[member] == nil {
		o.byMember[member] = map[int32][]int64{}
	}
	o.byMember[member][p] = append(o.byMember[member][p], offset)
}

// fail records a problem a waiting condition reports at once.
func (o *ownership) fail(msg string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fatal = append(o.fatal, msg)
}

// failed returns the first problem recorded by fail, nil if none.
func (o *ownership) failed() error {
	if len(o.fatal) > 0 {
		return errors.New(o.fatal[0])
	}
	return nil
}

// check fails the test with every exclusivity violation seen.
func (o *ownership) check() {
	o.t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.errs) > 0 {
		o.t.Fatalf("%d ownership violations; first: %s", len(o.errs), strings.Join(o.errs[:min(5, len(o.errs))], "; "))
	}
}

// exactCover returns nil once members' latest assignments are pairwise disjoint, each
// non-empty, and together cover partitions 0..n-1.
func (o *ownership) exactCover(members []string, n int32) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.failed(); err != nil {
		o.t.Fatal(err)
	}
	seen := map[int32]string{}
	for _, m := range members {
		if len(o.owned[m]) == 0 {
			return fmt.Errorf("member %s owns nothing; owned: %v", m, o.ownedString())
		}
		for p := range o.owned[m] {
			if other, ok := seen[p]; ok {
				return fmt.Errorf("partition %d owned by %s and %s", p, other, m)
			}
			seen[p] = m
		}
	}
	if len(seen) != int(n) {
		return fmt.Errorf("%d of %d partitions owned: %v", len(seen), n, o.ownedString())
	}
	return nil
}

func (o *ownership) ownedString() string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(o.owned)) {
		parts = append(parts, fmt.Sprintf("%s=%v", m, slices.Sorted(maps.Keys(o.owned[m]))))
	}
	return strings.Join(parts, " ")
}

// consumedAll returns nil once every offset below end[p] was consumed at least once.
func (o *ownership) consumedAll(end map[int32]int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.failed(); err != nil {
		o.t.Fatal(err)
	}
	missing := 0
	first := ""
	for p, e := range end {
		for off := int64(0); off < e; off++ {
			if o.consumed[p][off] == 0 {
				if missing == 0 {
					first = fmt.Sprintf("%d@%d", p, off)
				}
				missing++
			}
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d records not consumed yet, first %s; owned: %s", missing, first, o.ownedString())
	}
	return nil
}

// minOffsets returns the smallest offset member consumed per partition.
func (o *ownership) minOffsets(member string) map[int32]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[int32]int64{}
	for p, offs := range o.byMember[member] {
		out[p] = slices.Min(offs)
	}
	return out
}

// produceGroupRecords produces n records spread round-robin over the partitions.
func produceGroupRecords(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSeq(t, cl, topic, groupPartitions, n)
	cl.Close()
}

// committedOffsets returns the group's committed offset per partition of topic.
func committedOffsets(t *testing.T, b *Broker, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out map[int32]int64
	testutil.WaitFor(t, 30*time.Second, func() error {
		offs, err := b.Admin(t).FetchOffsets(ctx, group)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			return fmt.Errorf("fetch offsets of %s: %w", group, err)
		}
		out = map[int32]int64{}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				out[o.Partition] = o.At
			}
		})
		return nil
	})
	return out
}

// --- Apache Kafka's Java consumer ---------------------------------------------------

// javaMember is one GroupMember.java process.
type javaMember struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	// stderr keeps the process's log for failures.
	stderr bytes.Buffer
}

// startJavaMember runs e2e/testdata/GroupMember.java (compiled by TestMain) and feeds
// its event lines into own.
func startJavaMember(t *testing.T, b *Broker, own *ownership, group, topic, protocol, name string) *javaMember {
	t.Helper()
	log4j := filepath.Join(t.TempDir(), "log4j2-member.properties")
	writeFile(t, log4j, log4jConfig("warn", "SYSTEM_ERR"))
	cmd := exec.Command("java", javaArgs(t, []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + log4j}, "GroupMember", b.Addr(), group, topic, protocol, name)...)
	m := &javaMember{name: name, cmd: cmd, done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	cmd.Stderr = &m.stderr
	if m.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatalf("stdin pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start java member %s: %v", name, err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			parseMemberLine(own, sc.Text())
		}
		_ = cmd.Wait() // the exit status is checked by stop; a killed member fails here
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // already gone unless the test failed midway
		<-m.done
		if t.Failed() {
			t.Logf("java member %s stderr (tail):\n%s", name, tail(m.stderr.String(), 4<<10))
		}
	})
	return m
}

// parseMemberLine applies one GroupMember.java output line.
func parseMemberLine(own *ownership, line string) {
	f := strings.Fields(line)
	switch {
	case len(f) == 4 && f[0] == "OWNED":
		gen, _ := strconv.Atoi(f[2])
		var ps []int32
		if f[3] != "-" {
			for _, s := range strings.Split(f[3], ",") {
				p, _ := strconv.Atoi(s)
				ps = append(ps, int32(p))
			}
		}
		own.assign(f[1], int32(gen), ps)
	case len(f) == 4 && f[0] == "REC":
		p, _ := strconv.Atoi(f[2])
		off, _ := strconv.ParseInt(f[3], 10, 64)
		own.record(f[1], int32(p), off)
	case len(f) == 2 && f[0] == "CLOSED":
		own.gone(f[1])
	}
}

// kill ends the member with SIGKILL, as a crash: it does not leave the group.
func (m *javaMember) kill(t *testing.T, own *ownership) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill java member %s: %v", m.name, err)
	}
	<-m.done
	own.gone(m.name)
}

// stop asks the member to commit, leave and exit, and waits for a clean exit.
func (m *javaMember) stop(t *testing.T) {
	t.Helper()
	_ = m.stdin.Close() // end of file on stdin is the stop request
	select {
	case <-m.done:
	case <-time.After(groupWait):
		t.Fatalf("java member %s did not exit within %v of stop", m.name, groupWait)
	}
	if code := m.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("java member %s exited with %d; stderr:\n%s", m.name, code, tail(m.stderr.String(), 4<<10))
	}
}

// TestJavaConsumerGroup runs Apache Kafka's Java consumer in a group of three, with the
// classic protocol and with group.protocol=consumer (KIP-848).
func TestJavaConsumerGroup(t *testing.T) {
	tg := groupTarget(t)
	b := tg.start(t, groupOverrides()...)
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) { testJavaGroup(t, b, protocol) })
	}
}

func testJavaGroup(t *testing.T, b *Broker, protocol string) {
	began := time.Now()
	phase := func(what string) { t.Logf("%s: %s at %v", protocol, what, time.Since(began).Round(time.Millisecond)) }
	topic, group := "java-"+protocol, "java-group-"+protocol
	b.CreateTopic(t, topic, groupPartitions)
	produceGroupRecords(t, b, topic, 1200)
	own := newOwnership(t, false)
	names := []string{"j1", "j2", "j3"}
	members := map[string]*javaMember{}
	for _, n := range names {
		members[n] = startJavaMember(t, b, own, group, topic, protocol, n)
	}
	testutil.WaitFor(t, groupWait, func() error { return own.exactCover(names, groupPartitions) })
	phase("group formed")
	testutil.WaitFor(t, groupWait, func() error { return own.consumedAll(b.EndOffsets(t, topic)) })
	own.check()

	// Kill one member: the others own all partitions shortly after its session ends.
	killed := time.Now()
	members["j2"].kill(t, own)
	survivors := []string{"j1", "j3"}
	testutil.WaitFor(t, groupSession+takeoverSlack+5*time.Second, func() error { return own.exactCover(survivors, groupPartitions) })
	took := time.Since(killed)
	t.Logf("%s: survivors own every partition %v after the kill (session timeout %v)", protocol, took.Round(time.Millisecond), groupSession)
	if took > groupSession+takeoverSlack {
		t.Fatalf("takeover took %v; want at most the session timeout %v plus %v", took, groupSession, takeoverSlack)
	}
	produceGroupRecords(t, b, topic, 120)
	testutil.WaitFor(t, groupWait, func() error { return own.consumedAll(b.EndOffsets(t, topic)) })
	own.check()
	for _, n := range survivors {
		members[n].stop(t)
	}
	phase("survivors stopped")

	// Everything consumed was committed: a new member resumes after it.
	end := b.EndOffsets(t, topic)
	committed := committedOffsets(t, b, group, topic)
	if !maps.Equal(committed, end) {
		t.Fatalf("committed offsets %v; want the end offsets %v", committed, end)
	}
	produceGroupRecords(t, b, topic, 24)
	j4 := startJavaMember(t, b, own, group, topic, protocol, "j4")
	testutil.WaitFor(t, groupWait, func() error { return own.consumedAll(b.EndOffsets(t, topic)) })
	for p, first := range own.minOffsets("j4") {
		if first != committed[p] {
			t.Fatalf("new member started partition %d at offset %d; want the committed %d", p, first, committed[p])
		}
	}
	j4.stop(t)
	phase("new member resumed")

	// ConsumerGroupCommand lists, describes with lag, and resets the group.
	produceGroupRecords(t, b, topic, 5)
	const tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	list := runJava(t, tool, "--bootstrap-server", b.Addr(), "--list").stdout
	if !slices.Contains(strings.Fields(list), group) {
		t.Fatalf("--list does not show %s:\n%s", group, list)
	}
	phase("listed")
	describe := runJava(t, tool, "--bootstrap-server", b.Addr(), "--describe", "--group", group).stdout
	lag, rows := describedLag(t, describe, group, topic)
	if rows != groupPartitions || lag != 5 {
		t.Fatalf("--describe shows %d partitions with total lag %d; want %d with lag 5:\n%s", rows, lag, groupPartitions, describe)
	}
	phase("described")
	reset := runJava(t, tool, "--bootstrap-server", b.Addr(), "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute").stdout
	for p, o := range committedOffsets(t, b, group, topic) {
		if o != 0 {
			t.Fatalf("after --reset-offsets --to-earliest partition %d is at %d; want 0:\n%s", p, o, reset)
		}
	}
}

// describedLag sums the LAG column of ConsumerGroupCommand --describe rows for topic.
func describedLag(t *testing.T, out, group, topic string) (lag int64, rows int) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != group || f[1] != topic {
			continue
		}
		n, err := strconv.ParseInt(f[5], 10, 64)
		if err != nil {
			t.Fatalf("--describe row %q: lag %q: %v", line, f[5], err)
		}
		lag += n
		rows++
	}
	return lag, rows
}

// --- franz-go ------------------------------------------------------------------------

// TestFranzGoGroups runs franz-go group consumers with the eager range balancer, the
// cooperative-sticky balancer and the KIP-848 server-side assignor.
func TestFranzGoGroups(t *testing.T) {
	tg := groupTarget(t)
	b := tg.start(t, groupOverrides()...)
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		// realTime: ownership is checked at every instant, not only per generation
		// (KIP-848 has member epochs instead of a group-wide generation).
		realTime bool
	}{
		{"eager-range", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}, false},
		{"cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}, false},
		{"consumer-protocol", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testFranzGroup(t, b, tc.name, tc.opts, tc.realTime) })
	}
}

func testFranzGroup(t *testing.T, b *Broker, name string, opts []kgo.Opt, realTime bool) {
	topic, group := "franz-"+name, "franz-group-"+name
	b.CreateTopic(t, topic, groupPartitions)
	produceGroupRecords(t, b, topic, 1200)
	own := newOwnership(t, realTime)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := func(member string, extra ...kgo.Opt) (*kgo.Client, chan struct{}) {
		var cl *kgo.Client
		track := map[int32]bool{}
		var trackMu sync.Mutex
		update := func(gen int32) {
			ps := slices.Sorted(maps.Keys(track))
			own.assign(member, gen, ps)
		}
		o := append([]kgo.Opt{
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(member),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(groupSession), kgo.HeartbeatInterval(groupHeartbeat),
			kgo.FetchMaxBytes(4 << 10), kgo.FetchMaxPartitionBytes(1 << 10),
			kgo.OnPartitionsAssigned(func(_ context.Context, c *kgo.Client, a map[string][]int32) {
				trackMu.Lock()
				defer trackMu.Unlock()
				for _, p := range a[topic] {
					track[p] = true
				}
				_, gen := c.GroupMetadata()
				update(gen)
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, c *kgo.Client, r map[string][]int32) {
				if err := c.CommitUncommittedOffsets(ctx); err != nil {
					t.Logf("%s: commit on revoke: %v", member, err)
				}
				trackMu.Lock()
				defer trackMu.Unlock()
				for _, p := range r[topic] {
					delete(track, p)
				}
				_, gen := c.GroupMetadata()
				update(gen)
			}),
			kgo.OnPartitionsLost(func(_ context.Context, c *kgo.Client, l map[string][]int32) {
				trackMu.Lock()
				defer trackMu.Unlock()
				for _, p := range l[topic] {
					delete(track, p)
				}
				_, gen := c.GroupMetadata()
				update(gen)
			}),
		}, opts...)
		cl = b.Client(t, append(o, extra...)...)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
				fs := cl.PollRecords(pctx, 50)
				pcancel()
				if fs.IsClientClosed() {
					return
				}
				fs.EachRecord(func(r *kgo.Record) { own.record(member, r.Partition, r.Offset) })
				if len(fs.Records()) > 0 {
					if err := cl.CommitRecords(ctx, fs.Records()...); err != nil && ctx.Err() == nil {
						t.Logf("%s: commit: %v", member, err)
					}
				}
			}
		}()
		return cl, done
	}

	// Records keep arriving while the group forms and loses its member.
	stopProducing := produceInBackground(t, b, topic)
	// The victim is a static member (group.instance.id): closing its client does not
	// leave the group, so the coordinator sees a crash and waits out its session.
	names := []string{"f1", "f2", "f3"}
	clients := map[string]*kgo.Client{}
	dones := map[string]chan struct{}{}
	for _, m := range names {
		var extra []kgo.Opt
		if m == "f2" {
			extra = append(extra, kgo.InstanceID(group+"-f2"))
		}
		clients[m], dones[m] = start(m, extra...)
	}
	testutil.WaitFor(t, groupWait, func() error { return own.exactCover(names, groupPartitions) })
	testutil.WaitFor(t, groupWait, func() error {
		own.mu.Lock()
		defer own.mu.Unlock()
		if len(own.byMember["f2"]) == 0 {
			return fmt.Errorf("victim consumed nothing yet")
		}
		return nil
	})
	killed := time.Now()
	clients["f2"].Close()
	<-dones["f2"]
	own.gone("f2")
	survivors := []string{"f1", "f3"}
	testutil.WaitFor(t, groupSession+takeoverSlack+5*time.Second, func() error { return own.exactCover(survivors, groupPartitions) })
	t.Logf("%s: survivors own every partition %v after the kill", name, time.Since(killed).Round(time.Millisecond))
	stopProducing()
	testutil.WaitFor(t, groupWait, func() error { return own.consumedAll(b.EndOffsets(t, topic)) })
	own.check()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	for _, m := range survivors {
		if err := clients[m].CommitUncommittedOffsets(cctx); err != nil {
			t.Fatalf("%s: final commit: %v", m, err)
		}
	}
	cancel()
	for _, m := range survivors {
		clients[m].Close()
		<-dones[m]
	}
	end := b.EndOffsets(t, topic)
	if got := committedOffsets(t, b, group, topic); !maps.Equal(got, end) {
		t.Fatalf("committed %v; want the end offsets %v", got, end)
	}

	// Committed progress survives a broker restart.
	b.Stop()
	b.Restart()
	if got := committedOffsets(t, b, group, topic); !maps.Equal(got, end) {
		t.Fatalf("after restart committed %v; want %v", got, end)
	}
	produceGroupRecords(t, b, topic, 12)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	_, done := start("f4")
	testutil.WaitFor(t, groupWait, func() error { return own.consumedAll(b.EndOffsets(t, topic)) })
	cancel()
	<-done
	for p, first := range own.minOffsets("f4") {
		if first != end[p] {
			t.Fatalf("after restart a new member started partition %d at %d; want the committed %d", p, first, end[p])
		}
	}
}

// --- kcat -G (librdkafka) ----------------------------------------------------------------

// kcatMember is one kcat -G process.
type kcatMember struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// stopping is set before the test ends the process on purpose.
	stopping atomic.Bool
	mu       sync.Mutex
	log      bytes.Buffer // stderr
}

// signal sends sig to a member that is meant to exit.
func (m *kcatMember) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	m.stopping.Store(true)
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal kcat %s: %v", m.name, err)
	}
}

// startKcatMember runs a kcat balanced consumer printing "partition offset" per record;
// its rebalance lines on stderr update own.
func startKcatMember(t *testing.T, b *Broker, own *ownership, group, topic, name string) *kcatMember {
	t.Helper()
	cmd := exec.Command("kcat", "-b", b.Addr(), "-G", group, topic, "-u", "-f", "%p %o\\n",
		"-X", "client.id="+name, "-X", "auto.offset.reset=earliest",
		"-X", "session.timeout.ms="+strconv.FormatInt(groupSession.Milliseconds(), 10),
		"-X", "heartbeat.interval.ms="+strconv.FormatInt(groupHeartbeat.Milliseconds(), 10),
		"-X", "auto.commit.interval.ms=200", "-X", "partition.assignment.strategy=range",
		"-X", "message.max.bytes=4096", "-X", "fetch.max.bytes=4096", "-X", "max.partition.fetch.bytes=1024")
	m := &kcatMember{name: name, cmd: cmd, done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("stderr pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kcat %s: %v", name, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			p, err1 := strconv.Atoi(f[0])
			off, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 == nil && err2 == nil {
				own.record(name, int32(p), off)
			}
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			m.mu.Lock()
			m.log.WriteString(line + "\n")
			m.mu.Unlock()
			parseKcatRebalance(own, name, topic, line)
		}
	}()
	go func() {
		wg.Wait()
		err := cmd.Wait()
		if !m.stopping.Load() {
			m.mu.Lock()
			own.fail(fmt.Sprintf("kcat %s exited unexpectedly (%v): %s", name, err, tail(m.log.String(), 1<<10)))
			m.mu.Unlock()
		}
		close(m.done)
	}()
	t.Cleanup(func() {
		m.stopping.Store(true)
		_ = cmd.Process.Kill()
		<-m.done
		if t.Failed() {
			m.mu.Lock()
			t.Logf("kcat %s stderr (tail):\n%s", name, tail(m.log.String(), 4<<10))
			m.mu.Unlock()
		}
	})
	return m
}

// parseKcatRebalance reads kcat's "% Group g rebalanced (memberid m): assigned: t [0], t [3]"
// and "...: revoked: ..." lines. With the eager range assignor every assignment is whole.
func parseKcatRebalance(own *ownership, name, topic, line string) {
	_, rest, ok := strings.Cut(line, "rebalanced")
	if !ok {
		return
	}
	switch {
	case strings.Contains(rest, "revoked:"):
		own.assign(name, -1, nil)
	case strings.Contains(rest, "assigned:"):
		_, list, _ := strings.Cut(rest, "assigned:")
		var ps []int32
		for _, item := range strings.Split(list, ",") {
			item = strings.TrimSpace(item)
			tp, pp, ok := strings.Cut(item, " [")
			if !ok || tp != topic {
				continue
			}
			p, err := strconv.Atoi(strings.TrimSuffix(pp, "]"))
			if err == nil {
				ps = append(ps, int32(p))
			}
		}
		own.assign(name, -1, ps)
	}
}

// TestKcatGroup runs three kcat -G (librdkafka) members, kills one with SIGKILL, and
// checks takeover, at-least-once consumption and commits that survive a broker restart.
func TestKcatGroup(t *testing.T) {
	tg := groupTarget(t)
	b := tg.start(t, groupOverrides()...)
	topic, group := "kcat-group", "kcat-group"
	b.CreateTopic(t, topic, groupPartitions)
	produceGroupRecords(t, b, topic, 1200)
	stopProducing := produceInBackground(t, b, topic)
	own := newOwnership(t, false)
	names := []string{"k1", "k2", "k3"}
	members := map[string]*kcatMember{}
	for _, n := range names {
		members[n] = startKcatMember(t, b, own, group, topic, n)
	}
	testutil.WaitFor(t, groupWait, func() error { return own.exactCover(names, groupPartitions) })
	members["k2"].signal(t, syscall.SIGKILL)
	<-members["k2"].done
	own.gone("k2")
	killed := time.Now()
	survivors := []string{"k1", "k3"}
	testutil.WaitFor(t, groupSession+takeoverSlack+5*time.Second, func() error { return own.exactCover(survivors, groupPartitions) })
	t.Logf("kcat: survivors own every partition %v after the kill", time.Since(killed).Round(time.Millisecond))
	stopProducing()
	testutil.WaitFor(t, groupWait, func() error { return own.consumedAll(b.EndOffsets(t, topic)) })
	end := b.EndOffsets(t, topic)
	// Auto-commit runs every 200ms: wait for it to reach the end, then stop cleanly.
	testutil.WaitFor(t, groupWait, func() error {
		if got := committedOffsets(t, b, group, topic); !maps.Equal(got, end) {
			return fmt.Errorf("committed %v; want %v", got, end)
		}
		return nil
	})
	for _, n := range survivors {
		m := members[n]
		m.signal(t, syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(groupWait):
			t.Fatalf("kcat %s did not exit within %v of SIGTERM", n, groupWait)
		}
	}
	b.Stop()
	b.Restart()
	if got := committedOffsets(t, b, group, topic); !maps.Equal(got, end) {
		t.Fatalf("after restart committed %v; want %v", got, end)
	}
}

// --- bad group input -----------------------------------------------------------------------

// TestGroupBadInput sends malformed group requests through a real client and checks
// Kafka's error codes, then that the coordinator still serves a healthy group and
// reloads cleanly after a restart.
func TestGroupBadInput(t *testing.T) {
	tg := groupTarget(t)
	b := tg.start(t, groupOverrides()...)
	b.CreateTopic(t, "bad-group", 1)
	cl := b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"bad-group"}
	join := func(group, member, protocolType string, md []byte) *kmsg.JoinGroupResponse {
		t.Helper()
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = group, member, protocolType
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("JoinGroup %s: %v", group, err)
		}
		return resp
	}
	joined := func(group, protocolType string, md []byte) *kmsg.JoinGroupResponse {
		t.Helper()
		r := join(group, "", protocolType, md)
		if r.ErrorCode == kerr.MemberIDRequired.Code {
			r = join(group, r.MemberID, protocolType, md)
		}
		if r.ErrorCode != 0 {
			t.Fatalf("JoinGroup %s: %s", group, kerr.ErrorForCode(r.ErrorCode))
		}
		return r
	}
	expect := func(what string, got int16, want *kerr.Error) {
		t.Helper()
		if got != want.Code {
			t.Errorf("%s: %v; want %s", what, kerr.ErrorForCode(got), want.Message)
		}
	}

	// FindCoordinator v4+ answers a batch of group keys, each with the coordinator (Kafka
	// answers COORDINATOR_NOT_AVAILABLE while it creates __consumer_offsets).
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"bad-1", "bad-2", "bad-3"}
	testutil.WaitFor(t, 30*time.Second, func() error {
		fr, err := fc.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("FindCoordinator: %w", err)
		}
		if fr.Version < 4 {
			t.Fatalf("FindCoordinator answered v%d; want v4+ with batched keys", fr.Version)
		}
		var keys []string
		for _, c := range fr.Coordinators {
			if c.ErrorCode != 0 || c.NodeID < 0 || c.Port <= 0 {
				return fmt.Errorf("FindCoordinator key %s: %v node %d port %d", c.Key, kerr.ErrorForCode(c.ErrorCode), c.NodeID, c.Port)
			}
			keys = append(keys, c.Key)
		}
		if slices.Sort(keys); !slices.Equal(keys, fc.CoordinatorKeys) {
			t.Fatalf("FindCoordinator v%d answered keys %v; want %v", fr.Version, keys, fc.CoordinatorKeys)
		}
		return nil
	})

	// A member with another protocol type cannot join a group.
	g1 := joined("bad-1", "consumer", meta.AppendTo(nil))
	expect("JoinGroup with an unknown protocol type", join("bad-1", "", "not-a-consumer", meta.AppendTo(nil)).ErrorCode, kerr.InconsistentGroupProtocol)
	expect("JoinGroup with an empty protocol type", join("bad-2", "", "", meta.AppendTo(nil)).ErrorCode, kerr.InconsistentGroupProtocol)

	// SyncGroup from a stale generation, and (v5+) without its protocol type and name.
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "bad-1", g1.MemberID, g1.Generation
	sr, err := sync.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	expect("SyncGroup v5+ without protocol type and name", sr.ErrorCode, kerr.InconsistentGroupProtocol)
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	sync.Generation--
	if sr, err = sync.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	expect("SyncGroup from a stale generation", sr.ErrorCode, kerr.IllegalGeneration)

	// Commits from unknown members of a group with members. The client sends the
	// highest version both sides serve, which from v10 names the topic by id.
	md, err := b.Admin(t).Metadata(ctx, "bad-group")
	if err != nil {
		t.Fatal(err)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "bad-1", "nobody", g1.Generation
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "bad-group", TopicID: md.Topics["bad-group"].ID, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	cr, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	expect("OffsetCommit from an unknown member", cr.Topics[0].Partitions[0].ErrorCode, kerr.UnknownMemberID)

	// Member metadata larger than one __consumer_offsets batch (1 MiB): the join works,
	// storing the assignment fails as in Kafka, and nothing is written.
	big := kmsg.NewConsumerMemberMetadata()
	big.Topics = []string{"bad-group"}
	big.UserData = bytes.Repeat([]byte{'x'}, 2<<20)
	g3 := joined("bad-3", "consumer", big.AppendTo(nil))
	sync = kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "bad-3", g3.MemberID, g3.Generation
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: g3.MemberID, MemberAssignment: []byte{0, 0}}}
	if sr, err = sync.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	expect("SyncGroup of a group with oversized metadata", sr.ErrorCode, kerr.UnknownServerError)

	// Nothing is corrupted: a real group commits, and everything reloads after a restart.
	produceGroupRecords2(t, b, "bad-group", 10)
	consumer := b.Client(t, kgo.ConsumerGroup("bad-healthy"), kgo.ConsumeTopics("bad-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < 10 {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		got += len(fs.Records())
		if err := consumer.CommitRecords(ctx, fs.Records()...); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	consumer.Close()
	b.Stop()
	b.Restart()
	if got := committedOffsets(t, b, "bad-healthy", "bad-group"); got[0] != 10 {
		t.Fatalf("after restart the healthy group's commit is %v; want 10", got)
	}
	list, err := b.Admin(t).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(list.Groups(), "bad-healthy") {
		t.Fatalf("ListGroups after restart lacks bad-healthy: %v", list.Groups())
	}
}

// produceInBackground produces a record every millisecond, round-robin over the
// partitions, until the returned function is called; that function waits until every
// record is acknowledged.
func produceInBackground(t *testing.T, b *Broker, topic string) func() {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var failed atomicError
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := uint64(0); ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r := &kgo.Record{Topic: topic, Partition: int32(i % groupPartitions), Value: seqValue(i)}
			cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				if err != nil {
					failed.set(fmt.Errorf("partition %d: %w", r.Partition, err))
				}
			})
		}
	}()
	return func() {
		t.Helper()
		cancel()
		<-done
		fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer fcancel()
		if err := cl.Flush(fctx); err != nil {
			t.Fatalf("flush background producer: %v", err)
		}
		if err := failed.get(); err != nil {
			t.Fatalf("background produce: %v", err)
		}
	}
}

// atomicError keeps the first error set.
type atomicError struct {
	mu  sync.Mutex
	err error
}

func (a *atomicError) set(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
}

func (a *atomicError) get() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// produceGroupRecords2 produces n records to partition 0 of a one-partition topic.
func produceGroupRecords2(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSeq(t, cl, topic, 1, n)
	cl.Close()
}
