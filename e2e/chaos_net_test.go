package e2e

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// chaosNet is the network the chaos cluster runs on: where each node listens, what it
// advertises, how its command runs, and the network faults the nemesis can inject into it.
// Nodes are numbered from 0.
type chaosNet interface {
	// Mode names the network for the test log.
	Mode() string
	// Listen is the host a node binds, with its client and controller ports.
	Listen(i int) (host string, client, controller int)
	// Advertised is the client and controller address other nodes and clients dial.
	Advertised(i int) (client, controller string)
	// MetricsAddr and PprofAddr are where a node's metrics and pprof listeners bind.
	MetricsAddr(i int) string
	PprofAddr(i int) string
	// Wrap turns a node's argv into the one that starts it in its place on the network.
	Wrap(i int, argv []string) []string
	// CutKinds lists the network faults this network can inject.
	CutKinds() []string
	// Cut injects one fault of CutKinds against node i; Heal undoes every cut.
	Cut(i int, kind string) error
	Heal() error
}

// Network fault kinds.
const (
	// cutLinkDown takes the node's interface down inside its namespace.
	cutLinkDown = "link-down"
	// cutDrop silently drops everything between the node and every other host, both ways.
	cutDrop = "drop-all"
	// cutPeers silently drops traffic between the node and the other brokers only; clients
	// still reach it.
	cutPeers = "isolate-peers"
	// cutProxyReset closes every proxied connection of the node and refuses new ones.
	cutProxyReset = "proxy-reset"
	// cutProxyHold closes every proxied connection and holds new ones open without
	// forwarding a byte, like a dropped link.
	cutProxyHold = "proxy-blackhole"
)

// newChaosNet builds the network: network namespaces when CHAOS_NET is "netns" or unset and
// they can be made, else (or with CHAOS_NET=proxy) loopback addresses behind TCP proxies.
func newChaosNet(t *testing.T, n int) chaosNet {
	t.Helper()
	mode := os.Getenv("CHAOS_NET")
	switch mode {
	case "", "netns":
		nn, err := newNetnsNet(t, n)
		if err == nil {
			return nn
		}
		if mode == "netns" {
			t.Fatalf("CHAOS_NET=netns: %v", err)
		}
		t.Logf("network namespaces unavailable (%v); falling back to loopback proxies", err)
		return newProxyNet(t, n)
	case "proxy":
		return newProxyNet(t, n)
	default:
		t.Fatalf("CHAOS_NET=%q: want netns or proxy", mode)
		return nil
	}
}

// netnsNet puts each node in its own network namespace with a veth pair to a bridge in the
// root namespace, on 10.213.<sub>.0/24: the bridge is .1, node i is .11+i. Clients in the
// root namespace reach the nodes through the bridge.
type netnsNet struct {
	tag    string // prefix of every name made, unique per run
	sub    int    // third octet of the subnet
	bridge string
	ns     []string
	nsIf   []string // the node's end of its veth pair, inside its namespace

	mu       sync.Mutex
	linkDown []int      // nodes whose interface is down
	routes   [][]string // `ip route add` argument lists to delete on Heal, each with its -n prefix
}

const (
	netnsClientPort     = 9092
	netnsControllerPort = 9093
	netnsMetricsPort    = 9644
	netnsPprofPort      = 6060
)

func newNetnsNet(t *testing.T, n int) (*netnsNet, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("euid %d, not root", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, err
	}
	var r [3]byte
	var nn *netnsNet
	for range 20 {
		if _, err := rand.Read(r[:]); err != nil {
			return nil, err
		}
		tag := fmt.Sprintf("rbc%04x", binary.BigEndian.Uint16(r[:2]))
		sub := 1 + int(r[2])%254
		used, _ := exec.Command("ip", "-o", "addr", "show", "to", fmt.Sprintf("10.213.%d.0/24", sub)).Output()
		if _, err := net.InterfaceByName(tag + "br"); err == nil || len(strings.TrimSpace(string(used))) > 0 {
			continue
		}
		nn = &netnsNet{tag: tag, sub: sub, bridge: tag + "br"}
		break
	}
	if nn == nil {
		return nil, fmt.Errorf("no free subnet in 10.213.0.0/16")
	}
	t.Cleanup(nn.destroy)
	cmds := [][]string{
		{"link", "add", nn.bridge, "type", "bridge"},
		{"addr", "add", nn.hostIP() + "/24", "dev", nn.bridge},
		{"link", "set", nn.bridge, "up"},
	}
	for i := range n {
		ns, host, peer := fmt.Sprintf("%s-n%d", nn.tag, i+1), fmt.Sprintf("%sh%d", nn.tag, i+1), fmt.Sprintf("%sn%d", nn.tag, i+1)
		nn.ns = append(nn.ns, ns)
		nn.nsIf = append(nn.nsIf, peer)
		cmds = append(cmds,
			[]string{"netns", "add", ns},
			[]string{"link", "add", host, "type", "veth", "peer", "name", peer},
			[]string{"link", "set", peer, "netns", ns},
			[]string{"link", "set", host, "master", nn.bridge, "up"},
			[]string{"-n", ns, "addr", "add", nn.ip(i) + "/24", "dev", peer},
			[]string{"-n", ns, "link", "set", peer, "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, c := range cmds {
		if err := runIP(c...); err != nil {
			return nil, err
		}
	}
	return nn, nil
}

func runIP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (nn *netnsNet) hostIP() string  { return fmt.Sprintf("10.213.%d.1", nn.sub) }
func (nn *netnsNet) ip(i int) string { return fmt.Sprintf("10.213.%d.%d", nn.sub, 11+i) }

func (nn *netnsNet) Mode() string {
	return fmt.Sprintf("network namespaces %s-n1..%d on bridge %s, 10.213.%d.0/24", nn.tag, len(nn.ns), nn.bridge, nn.sub)
}

func (nn *netnsNet) Listen(i int) (string, int, int) {
	return nn.ip(i), netnsClientPort, netnsControllerPort
}

func (nn *netnsNet) Advertised(i int) (string, string) {
	return net.JoinHostPort(nn.ip(i), fmt.Sprint(netnsClientPort)), net.JoinHostPort(nn.ip(i), fmt.Sprint(netnsControllerPort))
}

func (nn *netnsNet) MetricsAddr(i int) string {
	return net.JoinHostPort(nn.ip(i), fmt.Sprint(netnsMetricsPort))
}

func (nn *netnsNet) PprofAddr(i int) string {
	return net.JoinHostPort(nn.ip(i), fmt.Sprint(netnsPprofPort))
}

// Wrap runs the node with `ip netns exec`, which execs it, so the process is the node's own.
func (nn *netnsNet) Wrap(i int, argv []string) []string {
	return append([]string{"ip", "netns", "exec", nn.ns[i]}, argv...)
}

func (nn *netnsNet) CutKinds() []string { return []string{cutLinkDown, cutDrop, cutPeers} }

func (nn *netnsNet) Cut(i int, kind string) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	switch kind {
	case cutLinkDown:
		nn.linkDown = append(nn.linkDown, i)
		return runIP("-n", nn.ns[i], "link", "set", nn.nsIf[i], "down")
	case cutDrop, cutPeers:
		// Blackhole routes: the victim drops what it sends to the others, the others (and
		// for drop-all the root namespace, where clients run) what they send to it.
		for j := range nn.ns {
			if j == i {
				continue
			}
			if err := nn.blackhole([]string{"-n", nn.ns[i]}, nn.ip(j)); err != nil {
				return err
			}
			if err := nn.blackhole([]string{"-n", nn.ns[j]}, nn.ip(i)); err != nil {
				return err
			}
		}
		if kind == cutDrop {
			if err := nn.blackhole([]string{"-n", nn.ns[i]}, nn.hostIP()); err != nil {
				return err
			}
			return nn.blackhole(nil, nn.ip(i))
		}
		return nil
	default:
		return fmt.Errorf("network fault %q: not one of %v", kind, nn.CutKinds())
	}
}

func (nn *netnsNet) blackhole(prefix []string, dst string) error {
	args := append(append([]string{}, prefix...), "route", "add", "blackhole", dst+"/32")
	nn.routes = append(nn.routes, args)
	return runIP(args...)
}

func (nn *netnsNet) Heal() error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	var first error
	for _, i := range nn.linkDown {
		if err := runIP("-n", nn.ns[i], "link", "set", nn.nsIf[i], "up"); err != nil && first == nil {
			first = err
		}
	}
	nn.linkDown = nil
	for _, add := range nn.routes {
		del := append([]string{}, add...)
		for k, a := range del {
			if a == "add" {
				del[k] = "del"
				break
			}
		}
		if err := runIP(del...); err != nil && first == nil {
			first = err
		}
	}
	nn.routes = nil
	return first
}

// destroy removes everything newNetnsNet made; deleting a namespace deletes its veth pair.
func (nn *netnsNet) destroy() {
	_ = nn.Heal() // removes the root namespace's blackhole routes
	for _, ns := range nn.ns {
		_ = runIP("netns", "del", ns)
	}
	_ = runIP("link", "del", nn.bridge)
}

// proxyNet is the fallback without namespaces: node i binds 127.<sub>.0.<11+i> and is reached
// only through TCP proxies on the same address, one per port, which cut its connections on
// command. Only connections into the node pass its proxies: a cut node still dials the others.
type proxyNet struct {
	sub     int
	client  []*chaosProxy
	control []*chaosProxy
	metrics []string
	pprof   []string
}

func newProxyNet(t *testing.T, n int) *proxyNet {
	t.Helper()
	var r [1]byte
	if _, err := rand.Read(r[:]); err != nil {
		t.Fatal(err)
	}
	pn := &proxyNet{sub: 1 + int(r[0])%254}
	for i := range n {
		host := pn.host(i)
		pn.client = append(pn.client, startChaosProxy(t, host, freePortOn(t, host)))
		pn.control = append(pn.control, startChaosProxy(t, host, freePortOn(t, host)))
		pn.metrics = append(pn.metrics, net.JoinHostPort(host, fmt.Sprint(freePortOn(t, host))))
		pn.pprof = append(pn.pprof, net.JoinHostPort(host, fmt.Sprint(freePortOn(t, host))))
	}
	return pn
}

func (pn *proxyNet) host(i int) string { return fmt.Sprintf("127.%d.0.%d", pn.sub, 11+i) }

func (pn *proxyNet) Mode() string {
	return fmt.Sprintf("loopback 127.%d.0.11..%d behind TCP proxies (cuts sever connections into a node only)", pn.sub, 10+len(pn.client))
}

func (pn *proxyNet) Listen(i int) (string, int, int) {
	return pn.host(i), pn.client[i].upstreamPort, pn.control[i].upstreamPort
}

func (pn *proxyNet) Advertised(i int) (string, string) {
	return pn.client[i].Addr(), pn.control[i].Addr()
}

func (pn *proxyNet) MetricsAddr(i int) string { return pn.metrics[i] }

func (pn *proxyNet) PprofAddr(i int) string { return pn.pprof[i] }

func (pn *proxyNet) Wrap(_ int, argv []string) []string { return argv }

func (pn *proxyNet) CutKinds() []string { return []string{cutProxyReset, cutProxyHold} }

func (pn *proxyNet) Cut(i int, kind string) error {
	if kind != cutProxyReset && kind != cutProxyHold {
		return fmt.Errorf("network fault %q: not one of %v", kind, pn.CutKinds())
	}
	pn.client[i].cut(kind == cutProxyHold)
	pn.control[i].cut(kind == cutProxyHold)
	return nil
}

func (pn *proxyNet) Heal() error {
	for i := range pn.client {
		pn.client[i].heal()
		pn.control[i].heal()
	}
	return nil
}

// freePortOn returns a TCP port on host that was free a moment ago.
func freePortOn(t *testing.T, host string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("find a free port on %s: %v", host, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// chaosProxy forwards bytes between clients and one upstream port on the same host until
// it is cut: then it closes every connection and either refuses new ones (closing them
// at once) or holds them open without forwarding, until healed.
type chaosProxy struct {
	ln           net.Listener
	upstream     string
	upstreamPort int

	mu    sync.Mutex
	state int // proxyOpen, proxyReset or proxyHold
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

const (
	proxyOpen = iota
	proxyReset
	proxyHold
)

func startChaosProxy(t *testing.T, host string, upstreamPort int) *chaosProxy {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("proxy listen on %s: %v", host, err)
	}
	p := &chaosProxy{ln: ln, upstream: net.JoinHostPort(host, fmt.Sprint(upstreamPort)), upstreamPort: upstreamPort,
		conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *chaosProxy) Addr() string { return p.ln.Addr().String() }

func (p *chaosProxy) cut(hold bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = proxyReset
	if hold {
		p.state = proxyHold
	}
	p.closeConnsLocked()
}

func (p *chaosProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == proxyHold {
		p.closeConnsLocked() // the held ones
	}
	p.state = proxyOpen
}

func (p *chaosProxy) closeConnsLocked() {
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *chaosProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closeConnsLocked()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *chaosProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.mu.Lock()
		state := p.state
		if state == proxyHold {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		switch state {
		case proxyReset:
			c.Close()
		case proxyOpen:
			p.wg.Add(1)
			go p.forward(c)
		}
	}
}

func (p *chaosProxy) forward(c net.Conn) {
	defer p.wg.Done()
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.state != proxyOpen {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}
