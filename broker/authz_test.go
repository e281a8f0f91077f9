package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"ringbroker/internal/testutil"
)

// authzJAAS gives the SASL listener three PLAIN users: admin (a super user in authzBroker),
// alice and bob, each with password "<name>-secret".
const authzJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" ` +
	`user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";`

// authzBroker runs a broker with Kafka's StandardAuthorizer, super.users=User:admin, a
// SASL_PLAINTEXT listener with authzJAAS's users and a PLAINTEXT one (User:ANONYMOUS, also the
// inter-broker listener).
func authzBroker(t *testing.T, io string, overrides ...string) *Broker {
	t.Helper()
	return startBroker(t, io, t.TempDir(), append([]string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms=PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + authzJAAS,
		"authorizer.class.name=" + standardAuthorizer,
		"super.users=User:admin",
	}, overrides...)...)
}

// userClient is a client of b's SASL listener logged in as user of authzJAAS.
func userClient(t *testing.T, b *Broker, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return saslClient(t, b, plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism(), opts...)
}

// aclSpec is one ACL binding to create, for any host.
type aclSpec struct {
	rt        kmsg.ACLResourceType
	pattern   kmsg.ACLResourcePatternType
	name      string
	principal string
	op        kmsg.ACLOperation
	perm      kmsg.ACLPermissionType
}

// allowACL allows user op on the literal resource name of type rt.
func allowACL(rt kmsg.ACLResourceType, name, user string, op kmsg.ACLOperation) aclSpec {
	return aclSpec{rt, kmsg.ACLResourcePatternTypeLiteral, name, "User:" + user, op, kmsg.ACLPermissionTypeAllow}
}

// createACLs creates specs with cl (a super user's client) and fails the test on any error.
func createACLs(t *testing.T, ctx context.Context, cl *kgo.Client, specs ...aclSpec) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, s := range specs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = s.rt, s.name, s.pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = s.principal, "*", s.op, s.perm
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("create ACL %+v: %v", specs[i], kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// brokerRequest sends req to b's node itself, not to a coordinator kgo would look up.
func brokerRequest(t *testing.T, ctx context.Context, cl *kgo.Client, b *Broker, req kmsg.Request) kmsg.Response {
	t.Helper()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Broker(int(b.cfg.NodeID)).Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// wantCode fails the test unless code is want.
func wantCode(t *testing.T, what string, code int16, want *kerr.Error) {
	t.Helper()
	if want == nil && code != 0 || want != nil && code != want.Code {
		t.Fatalf("%s: error %v; want %v", what, kerr.ErrorForCode(code), want)
	}
}

// fetchOnce fetches partition 0 of topic (named by name and id) from offset 0, as replica (-1: a
// consumer), and returns the partition's error code and the bytes of records it got.
func fetchOnce(t *testing.T, ctx context.Context, cl *kgo.Client, b *Broker, topic string, id [16]byte, replica int32) (int16, int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID = replica, replica
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 10, 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	resp := brokerRequest(t, ctx, cl, b, req).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch of %s: %+v", topic, resp)
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, len(p.RecordBatches)
}

// findCoordinator asks b for the coordinator of key (keyType 0 a group, 1 a transactional id).
func findCoordinator(t *testing.T, ctx context.Context, cl *kgo.Client, b *Broker, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = keyType, []string{key}
	resp := brokerRequest(t, ctx, cl, b, req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 1 {
		t.Fatalf("FindCoordinator of %q: %+v", key, resp)
	}
	return resp.Coordinators[0]
}

// TestAuthzReadWrite: a principal with READ on a topic and its group consumes in the group and
// commits; one with WRITE only produces (idempotently: WRITE on a topic stands for
// IDEMPOTENT_WRITE) but gets TOPIC_AUTHORIZATION_FAILED fetching and
// GROUP_AUTHORIZATION_FAILED at the group; the reader may not produce, nor get an idempotent
// producer id.
func TestAuthzReadWrite(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := authzBroker(t, io)
		admin := userClient(t, b, "admin")
		adm := kadm.NewClient(admin)
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
			t.Fatal(err)
		}
		createACLs(t, ctx, admin,
			allowACL(kmsg.ACLResourceTypeTopic, "orders", "alice", kmsg.ACLOperationRead),
			allowACL(kmsg.ACLResourceTypeGroup, "readers", "alice", kmsg.ACLOperationRead),
			allowACL(kmsg.ACLResourceTypeTopic, "orders", "bob", kmsg.ACLOperationWrite))

		bob := userClient(t, b, "bob", kgo.RequestRetries(3))
		for i := range 3 {
			if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
				t.Fatalf("bob's idempotent produce with WRITE on the topic: %v", err)
			}
		}

		alice := userClient(t, b, "alice", kgo.RequestRetries(3), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		got := 0
		for got < 3 {
			fs := alice.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("alice consuming in her group: %v", err)
			}
			got += fs.NumRecords()
		}
		if err := alice.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("alice commits: %v", err)
		}

		id := topicID(t, b, "orders")
		if code, _ := fetchOnce(t, ctx, bob, b, "orders", id, -1); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("bob fetches without READ: error %v; want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		if code, n := fetchOnce(t, ctx, userClient(t, b, "alice"), b, "orders", id, -1); code != 0 || n == 0 {
			t.Fatalf("alice fetches with READ: error %v, %d batches", kerr.ErrorForCode(code), n)
		}
		wantCode(t, "bob finds the readers' coordinator", findCoordinator(t, ctx, bob, b, 0, "readers").ErrorCode, kerr.GroupAuthorizationFailed)
		join := kmsg.NewPtrJoinGroupRequest()
		join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "readers", "consumer", 10000, 10000
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
		wantCode(t, "bob joins the readers", brokerRequest(t, ctx, bob, b, join).(*kmsg.JoinGroupResponse).ErrorCode, kerr.GroupAuthorizationFailed)
		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.Group, commit.Generation = "readers", -1
		commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", TopicID: id, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
		cresp := brokerRequest(t, ctx, bob, b, commit).(*kmsg.OffsetCommitResponse)
		wantCode(t, "bob commits for the readers", cresp.Topics[0].Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)

		reader := userClient(t, b, "alice", kgo.DisableIdempotentWrite())
		if err := reader.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice produces without WRITE: %v; want TOPIC_AUTHORIZATION_FAILED", err)
		}
		pid := brokerRequest(t, ctx, reader, b, kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
		wantCode(t, "alice's idempotent InitProducerId without WRITE anywhere", pid.ErrorCode, kerr.ClusterAuthorizationFailed)
	})
}

// metadataOf asks b's Metadata for topics (nil: all) as cl's principal, with the topics'
// authorized operations and auto-creation as given.
func metadataOf(t *testing.T, ctx context.Context, cl *kgo.Client, topics []string, autoCreate bool) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation, req.IncludeTopicAuthorizedOperations = autoCreate, true
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, name := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, mt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// metadataNames lists the topics a Metadata response describes without error.
func metadataNames(resp *kmsg.MetadataResponse) []string {
	var out []string
	for _, mt := range resp.Topics {
		if mt.ErrorCode == 0 && mt.Topic != nil {
			out = append(out, *mt.Topic)
		}
	}
	return out
}

// opsBits is the authorized-operations bit set of ops.
func opsBits(ops ...kmsg.ACLOperation) int32 {
	var bits int32
	for _, op := range ops {
		bits |= 1 << op
	}
	return bits
}

// TestAuthzMetadata: Metadata leaves topics the principal may not DESCRIBE out of an all-topics
// answer and refuses them by name (TOPIC_AUTHORIZATION_FAILED, no id) and by id (no name);
// auto-creation needs CREATE; authorized operations come from the ACLs, all of them for a super
// user, and the cluster's are 0 without DESCRIBE on it; DescribeTopicPartitions hides the same
// topics.
func TestAuthzMetadata(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := authzBroker(t, io)
		admin := userClient(t, b, "admin")
		adm := kadm.NewClient(admin)
		if _, err := adm.CreateTopics(ctx, 1, 1, nil, "visible", "hidden"); err != nil {
			t.Fatal(err)
		}
		createACLs(t, ctx, admin,
			allowACL(kmsg.ACLResourceTypeTopic, "visible", "alice", kmsg.ACLOperationDescribe),
			aclSpec{kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "auto-", "User:alice", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow})
		alice := userClient(t, b, "alice")

		all := metadataOf(t, ctx, alice, nil, false)
		if got := metadataNames(all); !slices.Equal(got, []string{"visible"}) {
			t.Fatalf("alice's all-topics Metadata lists %v; want only visible", got)
		}
		if ops := all.Topics[0].AuthorizedOperations; ops != opsBits(kmsg.ACLOperationDescribe) {
			t.Fatalf("alice's operations on visible: %b; want DESCRIBE alone", ops)
		}
		if got := metadataNames(metadataOf(t, ctx, admin, nil, false)); !slices.Contains(got, "hidden") || !slices.Contains(got, "visible") {
			t.Fatalf("the super user's all-topics Metadata lists %v; want both topics", got)
		}
		named := metadataOf(t, ctx, alice, []string{"visible", "hidden", "nope"}, false)
		for i, want := range []*kerr.Error{nil, kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed} {
			mt := named.Topics[i]
			wantCode(t, "Metadata of "+*mt.Topic, mt.ErrorCode, want)
			if want != nil && (mt.TopicID != [16]byte{} || len(mt.Partitions) > 0) {
				t.Fatalf("Metadata of %s without DESCRIBE discloses %+v", *mt.Topic, mt)
			}
		}
		byID := kmsg.NewPtrMetadataRequest()
		hiddenID := topicID(t, b, "hidden")
		byID.Topics = []kmsg.MetadataRequestTopic{{TopicID: hiddenID}}
		resp, err := byID.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if mt := resp.Topics[0]; mt.ErrorCode != kerr.TopicAuthorizationFailed.Code || mt.Topic != nil || mt.TopicID != hiddenID {
			t.Fatalf("Metadata of hidden by id: %+v; want TOPIC_AUTHORIZATION_FAILED with the id and no name", mt)
		}

		denied := metadataOf(t, ctx, alice, []string{"auto-one"}, true)
		wantCode(t, "auto-creating without CREATE", denied.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
		if _, ok := b.meta.Image().Topics["auto-one"]; ok {
			t.Fatal("a topic was auto-created for a principal without CREATE")
		}
		createACLs(t, ctx, admin, aclSpec{kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "auto-", "User:alice", kmsg.ACLOperationCreate, kmsg.ACLPermissionTypeAllow})
		// As Kafka's, the request that starts the creation is answered UNKNOWN_TOPIC_OR_PARTITION;
		// the topic is there when asked again.
		first := metadataOf(t, ctx, alice, []string{"auto-one"}, true)
		wantCode(t, "auto-creating with CREATE on the prefix", first.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)
		var created *kmsg.MetadataResponse
		for created == nil || created.Topics[0].ErrorCode != 0 {
			if ctx.Err() != nil {
				t.Fatalf("auto-one was not created: %+v", created.Topics[0])
			}
			time.Sleep(10 * time.Millisecond)
			created = metadataOf(t, ctx, alice, []string{"auto-one"}, true)
		}
		if ops := created.Topics[0].AuthorizedOperations; ops != opsBits(kmsg.ACLOperationDescribe, kmsg.ACLOperationCreate) {
			t.Fatalf("alice's operations on auto-one: %b; want DESCRIBE and CREATE", ops)
		}
		allTopicOps := opsBits(kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
			kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs)
		if ops := metadataOf(t, ctx, admin, []string{"hidden"}, false).Topics[0].AuthorizedOperations; ops != allTopicOps {
			t.Fatalf("the super user's operations on hidden: %b; want %b", ops, allTopicOps)
		}

		describe := kmsg.NewPtrDescribeClusterRequest()
		describe.IncludeClusterAuthorizedOperations = true
		for _, c := range []struct {
			cl   *kgo.Client
			want int32
		}{{alice, 0}, {admin, opsBits(kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
			kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe)}} {
			resp, err := describe.RequestWith(ctx, c.cl)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != 0 || resp.ClusterAuthorizedOperations != c.want {
				t.Fatalf("DescribeCluster: error %d, cluster operations %b; want %b", resp.ErrorCode, resp.ClusterAuthorizedOperations, c.want)
			}
		}

		dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dtp.ResponsePartitionLimit = 100
		dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "hidden"}, {Topic: "visible"}}
		dresp, err := dtp.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if len(dresp.Topics) != 2 || *dresp.Topics[0].Topic != "visible" || dresp.Topics[0].ErrorCode != 0 ||
			*dresp.Topics[1].Topic != "hidden" || dresp.Topics[1].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(dresp.Topics[1].Partitions) != 0 {
			t.Fatalf("DescribeTopicPartitions of hidden and visible: %+v", dresp.Topics)
		}
	})
}

// TestAuthzDenyPrefixedSuper: a DENY beats an ALLOW, a PREFIXED ALLOW covers every topic of
// its prefix, and a super user passes whatever the ACLs deny.
func TestAuthzDenyPrefixedSuper(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := authzBroker(t, io)
		admin := userClient(t, b, "admin")
		adm := kadm.NewClient(admin)
		if _, err := adm.CreateTopics(ctx, 1, 1, nil, "logs-app", "logs-secret"); err != nil {
			t.Fatal(err)
		}
		for _, topic := range []string{"logs-app", "logs-secret"} {
			if err := admin.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatalf("the super user produces to %s: %v", topic, err)
			}
		}
		createACLs(t, ctx, admin,
			aclSpec{kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "logs-", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow},
			aclSpec{kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "logs-secret", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeDeny},
			aclSpec{kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "logs-secret", "User:admin", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny})
		alice := userClient(t, b, "alice")
		if code, n := fetchOnce(t, ctx, alice, b, "logs-app", topicID(t, b, "logs-app"), -1); code != 0 || n == 0 {
			t.Fatalf("alice fetches logs-app under her PREFIXED ALLOW: error %v, %d bytes", kerr.ErrorForCode(code), n)
		}
		if code, _ := fetchOnce(t, ctx, alice, b, "logs-secret", topicID(t, b, "logs-secret"), -1); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("alice fetches logs-secret, denied by a LITERAL DENY: error %v; want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		if code, n := fetchOnce(t, ctx, admin, b, "logs-secret", topicID(t, b, "logs-secret"), -1); code != 0 || n == 0 {
			t.Fatalf("the super user fetches logs-secret despite a DENY: error %v, %d bytes", kerr.ErrorForCode(code), n)
		}
	})
}

// TestAuthzTransactions: a transactional producer without WRITE on its transactional id gets
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (FindCoordinator without DESCRIBE on it, then
// InitProducerId and Produce without WRITE); with WRITE on the id and the topic its transaction
// commits; the transaction APIs refuse what the principal may not touch.
func TestAuthzTransactions(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := authzBroker(t, io)
		admin := userClient(t, b, "admin")
		if _, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "tx"); err != nil {
			t.Fatal(err)
		}
		createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeTopic, "tx", "alice", kmsg.ACLOperationWrite))
		alice := userClient(t, b, "alice")
		wantCode(t, "FindCoordinator of a transactional id without DESCRIBE", findCoordinator(t, ctx, alice, b, 1, "tx-alice").ErrorCode, kerr.TransactionalIDAuthorizationFailed)

		createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeTransactionalId, "tx-alice", "alice", kmsg.ACLOperationDescribe))
		wantCode(t, "FindCoordinator with DESCRIBE on the id", findCoordinator(t, ctx, alice, b, 1, "tx-alice").ErrorCode, nil)
		init := kmsg.NewPtrInitProducerIDRequest()
		init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("tx-alice"), 10000
		ipid := brokerRequest(t, ctx, alice, b, init).(*kmsg.InitProducerIDResponse)
		wantCode(t, "InitProducerId without WRITE on the id", ipid.ErrorCode, kerr.TransactionalIDAuthorizationFailed)
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch = "tx-alice", 1, 0
		wantCode(t, "EndTxn without WRITE on the id", brokerRequest(t, ctx, alice, b, end).(*kmsg.EndTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)
		// A transactional batch under an id the principal may not write (produceRaw's
		// "txn-test") fails the whole request, before the topic is looked at.
		if code, _ := produceRaw(ctx, t, b, alice, "tx", initProducer(ctx, t, admin), 0, txnWithID, "v"); code != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Fatalf("transactional Produce without WRITE on its id: error %v", kerr.ErrorForCode(code))
		}

		createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeTransactionalId, "tx-alice", "alice", kmsg.ACLOperationWrite))
		producer := userClient(t, b, "alice", kgo.TransactionalID("tx-alice"), kgo.RequestRetries(5))
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("in a transaction")}).FirstErr(); err != nil {
			t.Fatalf("transactional produce with WRITE on the id and the topic: %v", err)
		}
		if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit with WRITE on the id: %v", err)
		}

		// DescribeTransactions and ListTransactions show alice only the ids she may describe.
		describe := kmsg.NewPtrDescribeTransactionsRequest()
		describe.TransactionalIDs = []string{"tx-alice", "tx-other"}
		dresp := brokerRequest(t, ctx, alice, b, describe).(*kmsg.DescribeTransactionsResponse)
		if len(dresp.TransactionStates) != 2 || dresp.TransactionStates[0].ErrorCode != 0 ||
			dresp.TransactionStates[1].TransactionalID != "tx-other" || dresp.TransactionStates[1].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Fatalf("DescribeTransactions of tx-alice and tx-other: %+v", dresp.TransactionStates)
		}
		list := func(cl *kgo.Client) []string {
			resp := brokerRequest(t, ctx, cl, b, kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
			var ids []string
			for _, s := range resp.TransactionStates {
				ids = append(ids, s.TransactionalID)
			}
			return ids
		}
		if ids := list(userClient(t, b, "bob")); len(ids) != 0 {
			t.Fatalf("ListTransactions shows bob %v; want nothing", ids)
		}
		if ids := list(alice); !slices.Equal(ids, []string{"tx-alice"}) {
			t.Fatalf("ListTransactions shows alice %v; want tx-alice", ids)
		}
	})
}

// TestAuthzAdminAPIs: CreateTopics without CREATE, DescribeConfigs without DESCRIBE_CONFIGS,
// the config, topic and record alterations without their operations, and the cluster APIs
// without their cluster ACL are refused with Kafka's codes; the super user passes.
func TestAuthzAdminAPIs(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := authzBroker(t, io)
		admin := userClient(t, b, "admin")
		adm := kadm.NewClient(admin)
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "conf"); err != nil {
			t.Fatal(err)
		}
		alice := userClient(t, b, "alice")
		aliceAdm := kadm.NewClient(alice)

		created, err := aliceAdm.CreateTopic(ctx, 1, 1, nil, "alices")
		if !errors.Is(errors.Join(err, created.Err), kerr.TopicAuthorizationFailed) {
			t.Fatalf("CreateTopics without CREATE: %v %v; want TOPIC_AUTHORIZATION_FAILED", err, created.Err)
		}
		createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeCluster, "kafka-cluster", "alice", kmsg.ACLOperationCreate))
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.TimeoutMillis = 10000
		topic := kmsg.NewCreateTopicsRequestTopic()
		topic.Topic, topic.NumPartitions, topic.ReplicationFactor = "alices", 1, 1
		ct.Topics = []kmsg.CreateTopicsRequestTopic{topic}
		ctResp, err := ct.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if r := ctResp.Topics[0]; r.ErrorCode != 0 || r.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || len(r.Configs) != 0 || r.NumPartitions != -1 {
			t.Fatalf("CreateTopics with CREATE on the cluster but no DESCRIBE_CONFIGS: %+v; want the topic without its configs", r)
		}

		dc := kmsg.NewPtrDescribeConfigsRequest()
		dc.Resources = []kmsg.DescribeConfigsRequestResource{
			{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "conf"},
			{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
		}
		dcResp, err := dc.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		// kgo sends the broker resource to that broker and merges: find each by type.
		byType := func(resp *kmsg.DescribeConfigsResponse, rt kmsg.ConfigResourceType) kmsg.DescribeConfigsResponseResource {
			for _, r := range resp.Resources {
				if r.ResourceType == rt {
					return r
				}
			}
			t.Fatalf("DescribeConfigs answered no resource of type %v: %+v", rt, resp)
			return kmsg.DescribeConfigsResponseResource{}
		}
		topicRes := byType(dcResp, kmsg.ConfigResourceTypeTopic)
		wantCode(t, "DescribeConfigs of a topic without DESCRIBE_CONFIGS", topicRes.ErrorCode, kerr.TopicAuthorizationFailed)
		wantCode(t, "DescribeConfigs of a broker without DESCRIBE_CONFIGS on the cluster", byType(dcResp, kmsg.ConfigResourceTypeBroker).ErrorCode, kerr.ClusterAuthorizationFailed)
		if m := topicRes.ErrorMessage; m == nil || *m != "Topic authorization failed." || len(topicRes.Configs) != 0 {
			t.Fatalf("DescribeConfigs refusal: %+v", topicRes)
		}
		dcResp, err = dc.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if r := byType(dcResp, kmsg.ConfigResourceTypeTopic); r.ErrorCode != 0 || len(r.Configs) == 0 {
			t.Fatalf("the super user's DescribeConfigs: %+v", r)
		}

		iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
		iac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
			{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "conf", Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}},
			{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "", Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("1000")}}},
		}
		iacResp := brokerRequest(t, ctx, alice, b, iac).(*kmsg.IncrementalAlterConfigsResponse)
		wantCode(t, "IncrementalAlterConfigs of a topic without ALTER_CONFIGS", iacResp.Resources[0].ErrorCode, kerr.TopicAuthorizationFailed)
		wantCode(t, "IncrementalAlterConfigs of the brokers without ALTER_CONFIGS", iacResp.Resources[1].ErrorCode, kerr.ClusterAuthorizationFailed)

		cp := kmsg.NewPtrCreatePartitionsRequest()
		cp.TimeoutMillis = 10000
		cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "conf", Count: 2}}
		cpResp, err := cp.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "CreatePartitions without ALTER", cpResp.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
		deleted, err := aliceAdm.DeleteTopics(ctx, "conf")
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(deleted["conf"].Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("DeleteTopics without DELETE: %v", deleted["conf"].Err)
		}
		dr := kmsg.NewPtrDeleteRecordsRequest()
		dr.TimeoutMillis = 10000
		dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "conf", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
		drResp := brokerRequest(t, ctx, alice, b, dr).(*kmsg.DeleteRecordsResponse)
		wantCode(t, "DeleteRecords without DELETE", drResp.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.ReplicaID = -1
		lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "conf", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
		loResp := brokerRequest(t, ctx, alice, b, lo).(*kmsg.ListOffsetsResponse)
		wantCode(t, "ListOffsets without DESCRIBE", loResp.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
		if code, _ := fetchOnce(t, ctx, alice, b, "conf", topicID(t, b, "conf"), 2); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("a follower's Fetch without CLUSTER_ACTION: error %v; want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}

		// The cluster APIs, each without its operation on the cluster.
		elect := kmsg.NewPtrElectLeadersRequest()
		elect.TimeoutMillis = 10000
		elect.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "conf", Partitions: []int32{0}}}
		eResp := brokerRequest(t, ctx, alice, b, elect).(*kmsg.ElectLeadersResponse)
		wantCode(t, "ElectLeaders", eResp.ErrorCode, kerr.ClusterAuthorizationFailed)
		wantCode(t, "ElectLeaders' partition", eResp.Topics[0].Partitions[0].ErrorCode, kerr.ClusterAuthorizationFailed)
		reassign := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		reassign.TimeoutMillis = 10000
		reassign.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "conf", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{1}}}}}
		wantCode(t, "AlterPartitionReassignments", brokerRequest(t, ctx, alice, b, reassign).(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
		wantCode(t, "ListPartitionReassignments", brokerRequest(t, ctx, alice, b, kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
		wantCode(t, "DescribeLogDirs", brokerRequest(t, ctx, alice, b, kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
		uf := kmsg.NewPtrUpdateFeaturesRequest()
		uf.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{{Feature: "group.version", MaxVersionLevel: 1, UpgradeType: 1}}
		wantCode(t, "UpdateFeatures", brokerRequest(t, ctx, alice, b, uf).(*kmsg.UpdateFeaturesResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
		dq := kmsg.NewPtrDescribeQuorumRequest()
		dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
		wantCode(t, "DescribeQuorum", brokerRequest(t, ctx, alice, b, dq).(*kmsg.DescribeQuorumResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
		markers := kmsg.NewPtrWriteTxnMarkersRequest()
		markers.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, Committed: true, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "conf", Partitions: []int32{0}}}}}
		mResp := brokerRequest(t, ctx, alice, b, markers).(*kmsg.WriteTxnMarkersResponse)
		wantCode(t, "WriteTxnMarkers", mResp.Markers[0].Topics[0].Partitions[0].ErrorCode, kerr.ClusterAuthorizationFailed)
		apt := kmsg.NewPtrAddPartitionsToTxnRequest()
		apt.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "t", ProducerID: 1, VerifyOnly: true,
			Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "conf", Partitions: []int32{0}}}}}
		wantCode(t, "AddPartitionsToTxn v4+ (a broker's)", brokerRequest(t, ctx, alice, b, apt).(*kmsg.AddPartitionsToTxnResponse).ErrorCode, kerr.ClusterAuthorizationFailed)

		// The super user may: the same cluster API answers.
		if resp := brokerRequest(t, ctx, admin, b, kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse); resp.ErrorCode != 0 || len(resp.Dirs) == 0 {
			t.Fatalf("the super user's DescribeLogDirs: %+v", resp)
		}
	})
}

// TestAuthzGroupAPIs: the group APIs check as Kafka's: OffsetCommit and OffsetFetch READ and
// DESCRIBE each topic apart from the group, ListGroups lists only the groups the principal may
// describe (all with DESCRIBE on the cluster), DescribeGroups, DeleteGroups and OffsetDelete
// refuse each group without its operation, and ConsumerGroupHeartbeat needs DESCRIBE on the
// topics it subscribes to.
func TestAuthzGroupAPIs(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := authzBroker(t, io)
		admin := userClient(t, b, "admin", kgo.RequestRetries(10))
		adm := kadm.NewClient(admin)
		if _, err := adm.CreateTopics(ctx, 1, 1, nil, "g-a", "g-b"); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 20*time.Second, func() error {
			var os kadm.Offsets
			os.Add(kadm.Offset{Topic: "g-a", Partition: 0, At: 1, LeaderEpoch: -1})
			resp, err := adm.CommitOffsets(ctx, "other", os)
			if err == nil {
				err = resp.Error()
			}
			return err
		})
		createACLs(t, ctx, admin,
			allowACL(kmsg.ACLResourceTypeGroup, "grp", "alice", kmsg.ACLOperationRead),
			allowACL(kmsg.ACLResourceTypeGroup, "cgh", "alice", kmsg.ACLOperationRead),
			allowACL(kmsg.ACLResourceTypeTopic, "g-a", "alice", kmsg.ACLOperationRead))
		alice := userClient(t, b, "alice")

		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.Group, commit.Generation = "grp", -1
		for _, topic := range []string{"g-a", "g-b"} {
			commit.Topics = append(commit.Topics, kmsg.OffsetCommitRequestTopic{Topic: topic, TopicID: topicID(t, b, topic),
				Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}})
		}
		cResp := brokerRequest(t, ctx, alice, b, commit).(*kmsg.OffsetCommitResponse)
		codes := map[[16]byte]int16{}
		for _, st := range cResp.Topics {
			codes[st.TopicID] = st.Partitions[0].ErrorCode
		}
		wantCode(t, "OffsetCommit of g-a with READ", codes[topicID(t, b, "g-a")], nil)
		wantCode(t, "OffsetCommit of g-b without READ", codes[topicID(t, b, "g-b")], kerr.TopicAuthorizationFailed)

		fetched, err := kadm.NewClient(alice).FetchOffsets(ctx, "grp")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := fetched.Lookup("g-a", 0); !ok || len(fetched) != 1 {
			t.Fatalf("alice's all-topics OffsetFetch: %+v; want g-a alone", fetched)
		}
		of := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "grp"
		for _, topic := range []string{"g-a", "g-b"} {
			rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: topic, TopicID: topicID(t, b, topic), Partitions: []int32{0}})
		}
		other := kmsg.NewOffsetFetchRequestGroup()
		other.Group = "other"
		of.Groups = []kmsg.OffsetFetchRequestGroup{rg, other}
		ofResp := brokerRequest(t, ctx, alice, b, of).(*kmsg.OffsetFetchResponse)
		if len(ofResp.Groups) != 2 || ofResp.Groups[1].ErrorCode != kerr.GroupAuthorizationFailed.Code || ofResp.Groups[0].ErrorCode != 0 {
			t.Fatalf("OffsetFetch of grp and other: %+v", ofResp.Groups)
		}
		for _, st := range ofResp.Groups[0].Topics {
			want := int16(0)
			if st.TopicID == topicID(t, b, "g-b") {
				want = kerr.TopicAuthorizationFailed.Code
			}
			if p := st.Partitions[0]; p.ErrorCode != want || want == 0 && p.Offset != 5 {
				t.Fatalf("OffsetFetch of grp, topic %x: %+v", st.TopicID, p)
			}
		}

		list := func(cl *kgo.Client) []string {
			resp := brokerRequest(t, ctx, cl, b, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
			var out []string
			for _, g := range resp.Groups {
				out = append(out, g.Group)
			}
			slices.Sort(out)
			return out
		}
		if got := list(alice); !slices.Equal(got, []string{"grp"}) {
			t.Fatalf("alice's ListGroups: %v; want grp alone", got)
		}
		if got := list(admin); !slices.Equal(got, []string{"grp", "other"}) {
			t.Fatalf("the super user's ListGroups: %v; want grp and other", got)
		}

		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups, dg.IncludeAuthorizedOperations = []string{"grp", "other"}, true
		dgResp := brokerRequest(t, ctx, alice, b, dg).(*kmsg.DescribeGroupsResponse)
		if len(dgResp.Groups) != 2 || dgResp.Groups[0].ErrorCode != 0 || dgResp.Groups[0].AuthorizedOperations != opsBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe) ||
			dgResp.Groups[1].Group != "other" || dgResp.Groups[1].ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("DescribeGroups of grp and other: %+v", dgResp.Groups)
		}

		od := kmsg.NewPtrOffsetDeleteRequest()
		od.Group = "other"
		od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "g-a", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		wantCode(t, "OffsetDelete without DELETE on the group", brokerRequest(t, ctx, alice, b, od).(*kmsg.OffsetDeleteResponse).ErrorCode, kerr.GroupAuthorizationFailed)
		createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeGroup, "grp", "alice", kmsg.ACLOperationDelete))
		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Groups = []string{"grp", "other"}
		delCodes := map[string]int16{}
		for _, g := range brokerRequest(t, ctx, alice, b, del).(*kmsg.DeleteGroupsResponse).Groups {
			delCodes[g.Group] = g.ErrorCode
		}
		wantCode(t, "DeleteGroups of grp with DELETE", delCodes["grp"], nil)
		wantCode(t, "DeleteGroups of other without DELETE", delCodes["other"], kerr.GroupAuthorizationFailed)

		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "cgh", "m-1", 10000
		hb.SubscribedTopicNames = []string{"g-a", "g-b"}
		wantCode(t, "ConsumerGroupHeartbeat subscribing to a topic without DESCRIBE",
			brokerRequest(t, ctx, alice, b, hb).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode, kerr.TopicAuthorizationFailed)
		hb.Group = "nope"
		wantCode(t, "ConsumerGroupHeartbeat without READ on the group",
			brokerRequest(t, ctx, alice, b, hb).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	})
}

// TestAuthzAllowEveryoneIfNoACL: with allow.everyone.if.no.acl.found a topic no ACL names is
// open to every principal, while one with an ACL is closed to all others.
func TestAuthzAllowEveryoneIfNoACL(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := authzBroker(t, io, "allow.everyone.if.no.acl.found=true")
		admin := userClient(t, b, "admin")
		if _, err := kadm.NewClient(admin).CreateTopics(ctx, 1, 1, nil, "open", "closed"); err != nil {
			t.Fatal(err)
		}
		createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeTopic, "closed", "alice", kmsg.ACLOperationAll))
		bob := userClient(t, b, "bob", kgo.RequestRetries(3))
		if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "open", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("bob produces to a topic no ACL names: %v", err)
		}
		if code, n := fetchOnce(t, ctx, bob, b, "open", topicID(t, b, "open"), -1); code != 0 || n == 0 {
			t.Fatalf("bob fetches from a topic no ACL names: error %v, %d bytes", kerr.ErrorForCode(code), n)
		}
		if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "closed", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("bob produces to a topic with an ACL for alice alone: %v; want TOPIC_AUTHORIZATION_FAILED", err)
		}
		alice := userClient(t, b, "alice", kgo.RequestRetries(3))
		if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "closed", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("alice produces to the topic her ACL allows: %v", err)
		}
	})
}

// TestAuthzInterBrokerCluster runs a 3-node cluster with the authorizer and
// super.users=User:ANONYMOUS, the principal of its PLAINTEXT inter-broker listener: followers
// fetch (CLUSTER_ACTION) and catch up, and a transaction over partitions led by different
// nodes commits, its markers written by WriteTxnMarkers and its partitions verified with
// AddPartitionsToTxn between brokers.
func TestAuthzInterBrokerCluster(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, io string) {
		bs := startInProcessCluster(t, 3, fastReplication, func(c *Config) {
			c.IO = io
			for _, o := range []string{"authorizer.class.name=" + standardAuthorizer, "super.users=User:ANONYMOUS"} {
				if err := c.Override(o); err != nil {
					t.Fatal(err)
				}
			}
		})
		waitUnfenced(t, bs)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		adm := newAdmin(t, clusterSeeds(bs))
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, "replicated"); err != nil {
			t.Fatal(err)
		}
		producer, err := kgo.NewClient(clusterSeeds(bs), kgo.TransactionalID("cluster-txn"), kgo.RequestRetries(20),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close()
		const n = 30
		testutil.WaitFor(t, 30*time.Second, func() error { return producer.BeginTransaction() })
		for i := range n {
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "replicated", Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatalf("transactional produce %d: %v", i, err)
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit: %v", err)
		}
		// Every replica of every partition holds what the leader has, markers included.
		id := bs[0].meta.Image().Topics["replicated"].ID
		testutil.WaitFor(t, 30*time.Second, func() error {
			for idx := range int32(3) {
				var ends []int64
				for _, b := range bs {
					p := b.parts.Load().lookupID(id, idx)
					if p == nil {
						return fmt.Errorf("node %d holds no replica of partition %d", b.cfg.NodeID, idx)
					}
					ends = append(ends, p.log().LogEndOffset())
				}
				if ends[0] == 0 || slices.Min(ends) != slices.Max(ends) {
					return fmt.Errorf("partition %d: log ends %v", idx, ends)
				}
			}
			return nil
		})
		consumer, err := kgo.NewClient(clusterSeeds(bs), kgo.ConsumeTopics("replicated"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer consumer.Close()
		for got := 0; got < n; {
			fs := consumer.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("read_committed consume after %d records: %v", got, err)
			}
			got += fs.NumRecords()
		}
	})
}
