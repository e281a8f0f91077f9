package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/internal/testutil"
)

// startDynamicCluster starts nodes of a dynamic quorum in process, one per role given
// (process.roles): node 1 formatted --standalone, the other controllers
// --no-initial-controllers, all with node 1's controller listener as
// controller.quorum.bootstrap.servers. It returns the nodes and their directory ids.
func startDynamicCluster(t *testing.T, roles ...string) ([]*Broker, []meta.UUID) {
	t.Helper()
	n := len(roles)
	ctrl := make([]int, n)
	for i := range ctrl {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctrl[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	cid := meta.NewUUID().String()
	logger := slog.New(slog.NewTextHandler(&strings.Builder{}, nil))
	var bs []*Broker
	var dirs []meta.UUID
	for i := range n {
		cfg := DefaultConfig()
		cfg.NodeID = int32(i + 1)
		cfg.ProcessRoles = strings.Split(roles[i], ",")
		cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1"}}
		if cfg.hasRole("controller") {
			cfg.Listeners = append(cfg.Listeners, Listener{Name: "CONTROLLER", Host: "127.0.0.1", Port: ctrl[i]})
		}
		cfg.LogDirs = []string{filepath.Join(t.TempDir(), "data")}
		cfg.MetricsListen, cfg.IO, cfg.Rings = "", "netpoll", 1
		cfg.ControllerListenerNames = []string{"CONTROLLER"}
		cfg.QuorumBootstrapServers = []string{fmt.Sprintf("127.0.0.1:%d", ctrl[0])}
		fastReplication(&cfg)
		if err := Format(cfg, cid, QuorumFormat{Standalone: i == 0, NoInitialControllers: i > 0 && cfg.hasRole("controller")}); err != nil {
			t.Fatalf("format node %d: %v", i+1, err)
		}
		dir, err := readDirectoryID(cfg.LogDirs[0])
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(cfg, logger)
		if err != nil {
			t.Fatalf("new node %d: %v", i+1, err)
		}
		if err := b.Start(); err != nil {
			b.Shutdown(context.Background())
			t.Fatalf("start node %d: %v", i+1, err)
		}
		t.Cleanup(func() { b.Shutdown(context.Background()) })
		bs, dirs = append(bs, b), append(dirs, dir)
	}
	return bs, dirs
}

// addRaftVoter sends AddRaftVoter for node id with directory id dir at controller listener
// port through the broker cl reaches, and returns the error code.
func addRaftVoter(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, dir meta.UUID, listener string, port int) int16 {
	t.Helper()
	code, _ := addRaftVoterMsg(ctx, t, cl, id, dir, listener, port)
	return code
}

// addRaftVoterMsg is addRaftVoter returning the error message too.
func addRaftVoterMsg(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, dir meta.UUID, listener string, port int) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID = id, dir
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = listener, "127.0.0.1", uint16(port)
	req.Listeners = append(req.Listeners, l)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorMessage == nil {
		return resp.ErrorCode, ""
	}
	return resp.ErrorCode, *resp.ErrorMessage
}

// removeRaftVoter sends RemoveRaftVoter through the broker cl reaches and returns the code.
func removeRaftVoter(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, dir meta.UUID) int16 {
	t.Helper()
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID = id, dir
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ErrorCode
}

// TestRaftVoterAPIs drives AddRaftVoter and RemoveRaftVoter through the follower of a dynamic
// quorum of two combined nodes and a broker-only node, which forwards them to the active
// controller: ApiVersions advertises both and kraft.version 1; DescribeQuorum v2 gives the
// voter and the two observers with their directory ids; Kafka's error codes for endpoints
// without the controller listener (INVALID_REQUEST), another directory id and a broker
// (REQUEST_TIMED_OUT), a voter added twice (DUPLICATE_VOTER) and a voter removed with another
// directory id (VOTER_NOT_FOUND); and the combined observer promoted to voter and back.
func TestRaftVoterAPIs(t *testing.T) {
	bs, dirs := startDynamicCluster(t, "broker,controller", "broker,controller", "broker")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, bs[1])

	vresp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	advertised := map[int16][2]int16{}
	for _, k := range vresp.ApiKeys {
		advertised[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if advertised[80] != [2]int16{0, 1} || advertised[81] != [2]int16{0, 0} {
		t.Fatalf("ApiVersions: AddRaftVoter %v, RemoveRaftVoter %v; want 0-1 and 0-0", advertised[80], advertised[81])
	}
	kraft := int16(-1)
	for _, f := range vresp.FinalizedFeatures {
		if f.Name == featureKRaftVersion {
			kraft = f.MaxVersionLevel
		}
	}
	if kraft != 1 {
		t.Fatalf("finalized kraft.version %d; want 1 on a dynamic quorum", kraft)
	}

	ctrlPort := bs[1].meta.ListenAddr().(*net.TCPAddr).Port
	members := func() (voters, observers map[int32]meta.UUID) {
		resp := describeQuorum(ctx, t, cl, 2, clusterMetadataTopic)
		voters, observers = map[int32]meta.UUID{}, map[int32]meta.UUID{}
		if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			for _, s := range resp.Topics[0].Partitions[0].CurrentVoters {
				voters[s.ReplicaID] = s.ReplicaDirectoryID
			}
			for _, s := range resp.Topics[0].Partitions[0].Observers {
				observers[s.ReplicaID] = s.ReplicaDirectoryID
			}
		}
		return voters, observers
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		if v, o := members(); len(v) != 1 || v[1] != dirs[0] || len(o) != 2 || o[2] != dirs[1] || o[3] != dirs[2] {
			return fmt.Errorf("voters %v observers %v; want voter 1 with %s, observers 2 and 3 with %s and %s", v, o, dirs[0], dirs[1], dirs[2])
		}
		return nil
	})

	for _, tc := range []struct {
		name     string
		id       int32
		listener string
		dir      meta.UUID
		want     *kerr.Error
		wantMsg  string
	}{
		{"no controller listener", 2, "OTHER", dirs[1], kerr.InvalidRequest, "do not contain a listener for CONTROLLER"},
		{"another directory id", 2, "CONTROLLER", meta.NewUUID(), kerr.RequestTimedOut, "has directory id " + dirs[1].String()},
		{"a broker", 3, "CONTROLLER", dirs[2], kerr.RequestTimedOut, "it is a broker"},
		{"a negative id", -1, "CONTROLLER", dirs[1], kerr.InvalidRequest, "not negative"},
	} {
		if code, msg := addRaftVoterMsg(ctx, t, cl, tc.id, tc.dir, tc.listener, ctrlPort); code != tc.want.Code || !strings.Contains(msg, tc.wantMsg) {
			t.Fatalf("AddRaftVoter, %s: error %v %q; want %s saying %q", tc.name, kerr.ErrorForCode(code), msg, tc.want.Message, tc.wantMsg)
		}
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		if code := addRaftVoter(ctx, t, cl, 2, dirs[1], "CONTROLLER", ctrlPort); code != 0 {
			return fmt.Errorf("AddRaftVoter 2: %v", kerr.ErrorForCode(code))
		}
		return nil
	})
	if v, o := members(); len(v) != 2 || v[2] != dirs[1] || len(o) != 1 {
		t.Fatalf("after adding 2: voters %v observers %v", v, o)
	}
	if code := addRaftVoter(ctx, t, cl, 2, dirs[1], "CONTROLLER", ctrlPort); code != kerr.DuplicateVoter.Code {
		t.Fatalf("AddRaftVoter of a voter: %v; want DUPLICATE_VOTER", kerr.ErrorForCode(code))
	}
	if code := removeRaftVoter(ctx, t, cl, -1, dirs[1]); code != kerr.InvalidRequest.Code {
		t.Fatalf("RemoveRaftVoter of a negative id: %v; want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	if code := removeRaftVoter(ctx, t, cl, 2, meta.NewUUID()); code != kerr.VoterNotFound.Code {
		t.Fatalf("RemoveRaftVoter with another directory id: %v; want VOTER_NOT_FOUND", kerr.ErrorForCode(code))
	}
	if code := removeRaftVoter(ctx, t, cl, 2, dirs[1]); code != 0 {
		t.Fatalf("RemoveRaftVoter 2: %v", kerr.ErrorForCode(code))
	}
	if v, o := members(); len(v) != 1 || len(o) != 2 || o[2] != dirs[1] {
		t.Fatalf("after removing 2: voters %v observers %v; want 1 voting, 2 and 3 observing", v, o)
	}
}

// TestRaftVoterAPIsStaticQuorum: a quorum without controller.quorum.bootstrap.servers (here a
// single node) has kraft.version 0, and its voter changes get UNSUPPORTED_VERSION, as Kafka's.
func TestRaftVoterAPIsStaticQuorum(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		b := startBroker(t, io, t.TempDir())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl := newClient(t, b)
		if code := addRaftVoter(ctx, t, cl, 2, meta.NewUUID(), "CONTROLLER", 9093); code != kerr.UnsupportedVersion.Code {
			t.Fatalf("AddRaftVoter: %v; want UNSUPPORTED_VERSION", kerr.ErrorForCode(code))
		}
		if code := removeRaftVoter(ctx, t, cl, b.cfg.NodeID, meta.UUID{}); code != kerr.UnsupportedVersion.Code {
			t.Fatalf("RemoveRaftVoter: %v; want UNSUPPORTED_VERSION", kerr.ErrorForCode(code))
		}
		vresp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range vresp.FinalizedFeatures {
			if f.Name == featureKRaftVersion {
				t.Fatalf("finalized kraft.version %d on a static quorum; want none (0)", f.MaxVersionLevel)
			}
		}
	})
}

// TestFormatQuorumOptions checks the format step's quorum options as kafka-storage format
// checks them: one of them on a controller of a dynamic quorum, none on a static quorum or a
// broker; --initial-controllers gives this node its listed directory id.
func TestFormatQuorumOptions(t *testing.T) {
	cid := meta.NewUUID().String()
	cfgOf := func(props ...string) Config {
		t.Helper()
		cfg := DefaultConfig()
		cfg.LogDirs = []string{t.TempDir()}
		for _, p := range append([]string{"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "controller.listener.names=CONTROLLER"}, props...) {
			if err := cfg.Override(p); err != nil {
				t.Fatal(err)
			}
		}
		return cfg
	}
	dynamic := "controller.quorum.bootstrap.servers=127.0.0.1:9093"
	for _, tc := range []struct {
		props []string
		qf    QuorumFormat
		want  string
	}{
		{[]string{dynamic}, QuorumFormat{}, "you must specify one of the following"},
		{[]string{dynamic}, QuorumFormat{Standalone: true, NoInitialControllers: true}, "only one of"},
		{[]string{"controller.quorum.voters=1@127.0.0.1:9093"}, QuorumFormat{Standalone: true}, "cannot specify controller.quorum.voters"},
		{[]string{dynamic, "process.roles=broker"}, QuorumFormat{Standalone: true}, "format a controller"},
		{[]string{dynamic}, QuorumFormat{InitialControllers: "2@127.0.0.1:9193:" + meta.NewUUID().String()}, "does not list node.id 1"},
	} {
		cfg := cfgOf(tc.props...)
		if err := Format(cfg, cid, tc.qf); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %+v: err %v; want one containing %q", tc.props, tc.qf, err, tc.want)
		}
		if _, err := readDirectoryID(cfg.LogDirs[0]); err == nil {
			t.Errorf("%v %+v: refused, but the log dir was formatted", tc.props, tc.qf)
		}
	}
	want := meta.NewUUID()
	cfg := cfgOf(dynamic)
	if err := Format(cfg, cid, QuorumFormat{InitialControllers: "1@127.0.0.1:9093:" + want.String() + ",2@127.0.0.1:9193:" + meta.NewUUID().String()}); err != nil {
		t.Fatal(err)
	}
	if got, err := readDirectoryID(cfg.LogDirs[0]); err != nil || got != want {
		t.Fatalf("directory id %s, %v; want %s from --initial-controllers", got, err, want)
	}
}
