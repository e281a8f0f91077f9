package broker

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"time"

	"ringbroker/broker/meta"
)

// A broker whose process died refuses connections at once, while its session at the active
// controller runs for broker.session.timeout.ms more. The brokers that talk to it (followers of
// its partitions, leaders it follows) notice first: they probe its endpoint and report a
// refusal, and the controller, after probing too, fences it (see probeSuspect).

// probeTimeout bounds one probe of a broker's endpoint.
const probeTimeout = time.Second

// followerProbes are the times after a follower's fetch connection closed at which its leader
// probes the follower's endpoint. A dead process's listening socket can outlive its
// connections a little (io_uring releases the sockets it holds asynchronously), so one probe
// is not enough; a live follower reconnects long before the last.
var followerProbes = [...]time.Duration{20 * time.Millisecond, 200 * time.Millisecond, time.Second}

// refusesConnections reports whether a dial of addr is refused: nothing listens there. A
// timeout or an accepted connection says nothing of the kind.
func refusesConnections(addr string) bool {
	conn, err := dialPeerTCP(addr, probeTimeout)
	if err == nil {
		conn.Close()
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// endpoint is a registered broker's client address.
func endpoint(br meta.Broker) string {
	return net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
}

// reportUnreachable tells the active controller that br refused a connection, at most one
// report per broker at a time.
func (b *Broker) reportUnreachable(br meta.Broker) {
	b.reportMu.Lock()
	if b.reporting[br.NodeID] {
		b.reportMu.Unlock()
		return
	}
	b.reporting[br.NodeID] = true
	b.reportMu.Unlock()
	go func() {
		defer func() {
			b.reportMu.Lock()
			delete(b.reporting, br.NodeID)
			b.reportMu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.BrokerSessionTimeout)
		defer cancel()
		if err := b.meta.ReportUnreachable(ctx, br.NodeID, br.Incarnation); err != nil {
			b.logger.Debug("report an unreachable broker", "node", br.NodeID, "err", err)
		}
	}()
}

// followerDisconnected runs when a follower's fetch connection to this leader closed: if the
// follower's endpoint then refuses connections, its process is gone, and the controller hears
// of it, so that the follower leaves the ISR and acks=all producers go on without waiting out
// its session.
func (b *Broker) followerDisconnected(node int32) {
	if b.closing.Load() || node == b.cfg.NodeID {
		return
	}
	go func() {
		start := time.Now()
		for _, at := range followerProbes {
			time.Sleep(time.Until(start.Add(at)))
			br, ok := b.meta.Image().Brokers[node]
			if !ok || br.Fenced || b.closing.Load() {
				return
			}
			if refusesConnections(endpoint(br)) {
				b.logger.Info("follower disconnected and refuses connections: reporting it", "node", node)
				b.reportUnreachable(br)
				return
			}
		}
	}()
}

// leaseHeld reports whether this broker reached the active controller within the session
// timeout before now: the controller fences a broker only after that long without a
// heartbeat, so until then no other broker can have been elected leader of its partitions.
// A leader cut off for longer refuses writes (NOT_LEADER_OR_FOLLOWER) rather than take records
// that the new leader's truncation would drop.
func (b *Broker) leaseHeld(now time.Time) bool {
	return now.UnixNano()-b.leaseStart.Load() < int64(b.cfg.BrokerSessionTimeout)
}

// renewLease records a heartbeat or registration sent at sent and acknowledged by the active
// controller. The lease runs from when it was sent, which the controller saw after.
func (b *Broker) renewLease(sent time.Time) {
	for {
		cur := b.leaseStart.Load()
		if sent.UnixNano() <= cur || b.leaseStart.CompareAndSwap(cur, sent.UnixNano()) {
			return
		}
	}
}
