package broker

import (
	"context"
	"crypto/hmac"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	ksasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"ringbroker/auth/sasl"
	"ringbroker/broker/meta"
	"ringbroker/internal/testcerts"
	"ringbroker/internal/testutil"
)

// tokenSecret is delegation.token.secret.key of the token tests.
const tokenSecret = "token-test-secret"

// tokenBroker is authzBroker with delegation tokens enabled and SCRAM beside PLAIN on the SASL
// listener, the expiry check running every checkMs.
func tokenBroker(t *testing.T, io string, checkMs string) *Broker {
	t.Helper()
	return authzBroker(t, io, "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"delegation.token.secret.key="+tokenSecret, "delegation.token.expiry.check.interval.ms="+checkMs)
}

// createToken creates a token with cl for owner ("" for the requester) renewed by renewers
// (User names), checking nothing but that the request was answered.
func createToken(t *testing.T, ctx context.Context, cl *kgo.Client, owner string, renewers ...string) *kmsg.CreateDelegationTokenResponse {
	t.Helper()
	req := kmsg.NewPtrCreateDelegationTokenRequest()
	if owner != "" {
		req.OwnerPrincipalType, req.OwnerPrincipalName = kmsg.StringPtr("User"), kmsg.StringPtr(owner)
	}
	for _, r := range renewers {
		rn := kmsg.NewCreateDelegationTokenRequestRenewer()
		rn.PrincipalType, rn.PrincipalName = "User", r
		req.Renewers = append(req.Renewers, rn)
	}
	req.MaxLifetimeMillis = -1
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("CreateDelegationToken: %v", err)
	}
	return resp
}

// renewToken renews the token of mac with cl for period ms (Renew) or, with expire, sets its
// expiry period (Expire), returning the error code and the expiry answered.
func renewToken(t *testing.T, ctx context.Context, cl *kgo.Client, mac []byte, period int64, expire bool) (int16, int64) {
	t.Helper()
	if expire {
		req := kmsg.NewPtrExpireDelegationTokenRequest()
		req.HMAC, req.ExpiryPeriodMillis = mac, period
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("ExpireDelegationToken: %v", err)
		}
		return resp.ErrorCode, resp.ExpiryTimestamp
	}
	req := kmsg.NewPtrRenewDelegationTokenRequest()
	req.HMAC, req.RenewTimeMillis = mac, period
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("RenewDelegationToken: %v", err)
	}
	return resp.ErrorCode, resp.ExpiryTimestamp
}

// describedTokens is what DescribeDelegationToken lists to cl for owners (nil: all), as token
// ids, after checking the answer has no error.
func describedTokens(t *testing.T, ctx context.Context, cl *kgo.Client, owners ...string) []string {
	t.Helper()
	req := kmsg.NewPtrDescribeDelegationTokenRequest()
	if owners != nil {
		req.Owners = []kmsg.DescribeDelegationTokenRequestOwner{}
	}
	for _, o := range owners {
		ow := kmsg.NewDescribeDelegationTokenRequestOwner()
		ow.PrincipalType, ow.PrincipalName = "User", o
		req.Owners = append(req.Owners, ow)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("DescribeDelegationToken: %v", err)
	}
	wantCode(t, "DescribeDelegationToken", resp.ErrorCode, nil)
	var ids []string
	for _, d := range resp.TokenDetails {
		ids = append(ids, d.TokenID)
	}
	return ids
}

// tokenAuth is the SCRAM-SHA-512 mechanism of a token.
func tokenAuth(id string, mac []byte) ksasl.Mechanism {
	return scram.Auth{User: id, Pass: base64.StdEncoding.EncodeToString(mac), IsToken: true}.AsSha512Mechanism()
}

// TestDelegationTokens runs the four token APIs through the wire against a broker with ACLs:
// who may create, renew, expire and see which token, with Kafka's errors; a client
// authenticating with a token runs as its owner and may not use the token APIs; an expired
// token authenticates no more and the expiry check removes it.
func TestDelegationTokens(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := tokenBroker(t, io, "100")
		admin, alice, bob := userClient(t, b, "admin"), userClient(t, b, "alice"), userClient(t, b, "bob")

		versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int16][2]int16{38: {1, 3}, 39: {1, 2}, 40: {1, 2}, 41: {1, 3}}
		for _, k := range versions.ApiKeys {
			if w, ok := want[k.ApiKey]; ok && (k.MinVersion == w[0] && k.MaxVersion == w[1]) {
				delete(want, k.ApiKey)
			}
		}
		if len(want) != 0 {
			t.Fatalf("ApiVersions lacks %v (key: min, max), Kafka 4.1.1's token APIs", want)
		}

		// Not on PLAINTEXT.
		plaintext := newClient(t, b)
		wantCode(t, "create over PLAINTEXT", createToken(t, ctx, plaintext, "").ErrorCode, kerr.DelegationTokenRequestNotAllowed)
		if code, _ := renewToken(t, ctx, plaintext, []byte("x"), -1, false); code != kerr.DelegationTokenRequestNotAllowed.Code {
			t.Fatalf("renew over PLAINTEXT: %v", kerr.ErrorForCode(code))
		}

		before := time.Now().UnixMilli()
		created := createToken(t, ctx, alice, "", "bob")
		wantCode(t, "alice creates", created.ErrorCode, nil)
		m := hmac.New(sha512.New, []byte(tokenSecret))
		m.Write([]byte(created.TokenID))
		if !hmac.Equal(created.HMAC, m.Sum(nil)) {
			t.Fatalf("token %s: HMAC %x; want HMAC-SHA512 of the id under the secret", created.TokenID, created.HMAC)
		}
		if created.PrincipalName != "alice" || created.TokenRequesterPrincipalName != "alice" || created.IssueTimestamp < before ||
			created.ExpiryTimestamp != created.IssueTimestamp+24*3600*1000 || created.MaxTimestamp != created.IssueTimestamp+7*24*3600*1000 {
			t.Fatalf("created %+v; want alice's, expiring in a day, at most a week", created)
		}
		aliceToken := created

		// Another owner needs CREATE_TOKENS on that user; a super user has it.
		wantCode(t, "alice creates for bob", createToken(t, ctx, alice, "bob").ErrorCode, kerr.DelegationTokenAuthorizationFailed)
		bobToken := createToken(t, ctx, admin, "bob")
		wantCode(t, "admin creates for bob", bobToken.ErrorCode, nil)
		if bobToken.PrincipalName != "bob" || bobToken.TokenRequesterPrincipalName != "admin" {
			t.Fatalf("admin's token for bob: owner %s, requester %s", bobToken.PrincipalName, bobToken.TokenRequesterPrincipalName)
		}
		bad := kmsg.NewPtrCreateDelegationTokenRequest()
		bad.Renewers = []kmsg.CreateDelegationTokenRequestRenewer{{PrincipalType: "Group", PrincipalName: "g"}}
		if resp, err := bad.RequestWith(ctx, alice); err != nil || resp.ErrorCode != kerr.InvalidPrincipalType.Code {
			t.Fatalf("renewer of type Group: %v, %+v; want INVALID_PRINCIPAL_TYPE", err, resp)
		}
		bad = kmsg.NewPtrCreateDelegationTokenRequest()
		bad.OwnerPrincipalName = kmsg.StringPtr("bob")
		if resp, err := bad.RequestWith(ctx, admin); err != nil || resp.ErrorCode != kerr.InvalidPrincipalType.Code || resp.PrincipalName != "bob" {
			t.Fatalf("owner without a principal type: %v, %+v; want INVALID_PRINCIPAL_TYPE", err, resp)
		}

		// Who sees what: owners and renewers their tokens, a super user all, owners filter.
		both := []string{aliceToken.TokenID, bobToken.TokenID}
		slices.Sort(both)
		for _, c := range []struct {
			name   string
			cl     *kgo.Client
			owners []string
			want   []string
		}{
			{"alice", alice, nil, []string{aliceToken.TokenID}},
			{"bob, owner and renewer", bob, nil, both},
			{"admin", admin, nil, both},
			{"admin, owner alice", admin, []string{"alice"}, []string{aliceToken.TokenID}},
			{"admin, no owners", admin, []string{}, nil},
		} {
			if got := describedTokens(t, ctx, c.cl, c.owners...); !slices.Equal(got, c.want) {
				t.Fatalf("%s describes %v; want %v", c.name, got, c.want)
			}
		}
		// Others' tokens: DESCRIBE_TOKENS on the owner, or DESCRIBE on the token.
		createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeUser, "User:bob", "alice", kmsg.ACLOperationDescribeTokens))
		if got := describedTokens(t, ctx, alice); !slices.Equal(got, both) {
			t.Fatalf("alice with DESCRIBE_TOKENS on bob describes %v; want %v", got, both)
		}
		carol := createToken(t, ctx, admin, "carol")
		wantCode(t, "admin creates for carol", carol.ErrorCode, nil)
		createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeDelegationToken, carol.TokenID, "bob", kmsg.ACLOperationDescribe))
		if got := describedTokens(t, ctx, bob, "carol"); !slices.Equal(got, []string{carol.TokenID}) {
			t.Fatalf("bob with DESCRIBE on carol's token describes %v; want %v", got, carol.TokenID)
		}
		if got := describedTokens(t, ctx, alice, "carol"); len(got) != 0 {
			t.Fatalf("alice describes carol's tokens %v; want none", got)
		}
		if code, _ := renewToken(t, ctx, admin, carol.HMAC, -1, true); code != kerr.DelegationTokenOwnerMismatch.Code {
			t.Fatalf("admin, not carol, expires carol's token: %v; want DELEGATION_TOKEN_OWNER_MISMATCH", kerr.ErrorForCode(code))
		}

		// A token client runs as the owner: alice may write to her topic, bob's token may not.
		createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeTopic, "alices", "alice", kmsg.ACLOperationAll))
		if _, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "alices"); err != nil {
			t.Fatal(err)
		}
		viaToken := saslClient(t, b, tokenAuth(aliceToken.TokenID, aliceToken.HMAC))
		if err := viaToken.ProduceSync(ctx, &kgo.Record{Topic: "alices", Value: []byte("by token")}).FirstErr(); err != nil {
			t.Fatalf("produce with alice's token: %v", err)
		}
		viaBobs := saslClient(t, b, tokenAuth(bobToken.TokenID, bobToken.HMAC))
		if err := viaBobs.ProduceSync(ctx, &kgo.Record{Topic: "alices", Value: []byte("by bob")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("produce with bob's token to alice's topic: %v; want TOPIC_AUTHORIZATION_FAILED", err)
		}
		wantCode(t, "create with a token", createToken(t, ctx, viaToken, "").ErrorCode, kerr.DelegationTokenRequestNotAllowed)

		// Renew: the owner or a renewer, never past the maximum.
		if code, _ := renewToken(t, ctx, admin, aliceToken.HMAC, 1000, false); code != kerr.DelegationTokenOwnerMismatch.Code {
			t.Fatalf("admin renews alice's token: %v; want DELEGATION_TOKEN_OWNER_MISMATCH", kerr.ErrorForCode(code))
		}
		if code, _ := renewToken(t, ctx, bob, []byte("no such hmac"), 1000, false); code != kerr.DelegationTokenNotFound.Code {
			t.Fatalf("renew an unknown HMAC: %v; want DELEGATION_TOKEN_NOT_FOUND", kerr.ErrorForCode(code))
		}
		now := time.Now().UnixMilli()
		code, expiry := renewToken(t, ctx, bob, aliceToken.HMAC, 60_000, false)
		if code != 0 || expiry < now+60_000 || expiry > time.Now().UnixMilli()+60_000 {
			t.Fatalf("bob renews alice's token for a minute: %v, expiry %d; want about %d", kerr.ErrorForCode(code), expiry, now+60_000)
		}

		// Expire at once: the token authenticates no more.
		if code, expiry := renewToken(t, ctx, alice, aliceToken.HMAC, -1, true); code != 0 || expiry != -1 {
			t.Fatalf("alice expires her token at once: %v, expiry %d; want -1", kerr.ErrorForCode(code), expiry)
		}
		if code, _ := renewToken(t, ctx, alice, aliceToken.HMAC, 1000, false); code != kerr.DelegationTokenNotFound.Code {
			t.Fatalf("renew an expired token: %v; want DELEGATION_TOKEN_NOT_FOUND", kerr.ErrorForCode(code))
		}
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, saslClient(t, b, tokenAuth(aliceToken.TokenID, aliceToken.HMAC))); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("authenticate with an expired token: %v; want SASL_AUTHENTICATION_FAILED", err)
		}

		// Expire later: past its expiry the token is refused, then the expiry check removes it.
		if code, _ := renewToken(t, ctx, bob, bobToken.HMAC, 0, true); code != 0 {
			t.Fatalf("bob expires his token now: %v", kerr.ErrorForCode(code))
		}
		testutil.WaitFor(t, 10*time.Second, func() error {
			if ids := describedTokens(t, ctx, admin); !slices.Equal(ids, []string{carol.TokenID}) {
				return fmt.Errorf("tokens %v after the expiry check; want bob's removed, carol's %s left", ids, carol.TokenID)
			}
			return nil
		})
	})
}

// TestDelegationTokensDisabled: without delegation.token.secret.key the four APIs answer
// DELEGATION_TOKEN_AUTH_DISABLED over SASL, and token authentication fails.
func TestDelegationTokensDisabled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := authzBroker(t, "netpoll", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512")
	alice := userClient(t, b, "alice")
	wantCode(t, "create", createToken(t, ctx, alice, "").ErrorCode, kerr.DelegationTokenAuthDisabled)
	for _, expire := range []bool{false, true} {
		if code, _ := renewToken(t, ctx, alice, []byte("x"), 1, expire); code != kerr.DelegationTokenAuthDisabled.Code {
			t.Fatalf("renew/expire (%v): %v; want DELEGATION_TOKEN_AUTH_DISABLED", expire, kerr.ErrorForCode(code))
		}
	}
	resp, err := kmsg.NewPtrDescribeDelegationTokenRequest().RequestWith(ctx, alice)
	if err != nil || resp.ErrorCode != kerr.DelegationTokenAuthDisabled.Code {
		t.Fatalf("describe: %v, %+v; want DELEGATION_TOKEN_AUTH_DISABLED", err, resp)
	}
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, saslClient(t, b, tokenAuth("id", []byte("mac"))))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("token authentication with tokens disabled: %v; want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestTokenCredential: a token's SCRAM credential takes the base64 HMAC as password and names
// the owner; a token past its expiry or maximum is refused before the expiry check removes
// it, and so is an unknown one.
func TestTokenCredential(t *testing.T) {
	now := time.Now().UnixMilli()
	im := meta.EmptyImage("cid")
	im.DelegationTokens = map[string]meta.DelegationToken{
		"live":    {TokenID: "live", Owner: "User:alice", IssueMs: now, ExpiryMs: now + 60_000, MaxMs: now + 120_000},
		"expired": {TokenID: "expired", Owner: "User:alice", IssueMs: now - 2000, ExpiryMs: now - 1000, MaxMs: now + 120_000},
		"maxed":   {TokenID: "maxed", Owner: "User:alice", IssueMs: now - 2000, ExpiryMs: now + 60_000, MaxMs: now - 1000},
	}
	cfg := DefaultConfig()
	cfg.Security.TokenSecret = tokenSecret
	s := newScramFromImage(&cfg)
	imageOf := func() *meta.Image { return im }
	s.image.Store(&imageOf)
	tc, ok := s.TokenCredential("live", "SCRAM-SHA-256")
	if !ok || tc.Owner != "alice" || tc.Expiry.UnixMilli() != now+60_000 {
		t.Fatalf("live token: %+v, %v; want alice's, expiring at %d", tc, ok, now+60_000)
	}
	want, err := sasl.CredentialFromPassword("SCRAM-SHA-256", base64.StdEncoding.EncodeToString(tokenHMAC(tokenSecret, "live")), tc.Salt, tc.Iterations)
	if err != nil || !hmac.Equal(want.StoredKey, tc.StoredKey) {
		t.Fatalf("live token's credential is not derived from its HMAC: %v", err)
	}
	if again, _ := s.TokenCredential("live", "SCRAM-SHA-256"); !hmac.Equal(again.Salt, tc.Salt) {
		t.Fatal("a token's credential is derived again at the next authentication")
	}
	for _, id := range []string{"expired", "maxed", "unknown"} {
		if _, ok := s.TokenCredential(id, "SCRAM-SHA-256"); ok {
			t.Fatalf("token %s gave a credential", id)
		}
	}
	if recs := expiredTokenRecords(im, now); len(recs) != 2 || recs[0].TokenID != "expired" || recs[1].TokenID != "maxed" {
		t.Fatalf("expiry check at %d removes %+v; want expired and maxed", now, recs)
	}
}

// TestDelegationTokenSession: with connections.max.reauth.ms, a session authenticated with a
// token ends when the token expires (KIP-368), and the client's re-authentication with the
// expired token fails.
//
// Past the first record the test produces with bounded raw requests: kgo re-authenticates
// before every request once a session has less than a second left, and a request sent on a
// session granted in the token's last milliseconds can arrive after it ended, which closes the
// connection as in Kafka. ProduceSync would then hold the record and retry it for as long as
// metadata requests fail to authenticate, past any context; a raw request retries on a new
// connection, whose authentication fails.
func TestDelegationTokenSession(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := authzBroker(t, "netpoll", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512", "delegation.token.secret.key="+tokenSecret,
		"connections.max.reauth.ms=60000", "allow.everyone.if.no.acl.found=true", "auto.create.topics.enable=true")
	alice := userClient(t, b, "alice")
	tok := createToken(t, ctx, alice, "")
	wantCode(t, "create", tok.ErrorCode, nil)
	code, expiry := renewToken(t, ctx, alice, tok.HMAC, 1500, true)
	if code != 0 {
		t.Fatalf("expire in 1.5 s: %v", kerr.ErrorForCode(code))
	}
	cl := saslClient(t, b, tokenAuth(tok.TokenID, tok.HMAC), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "session", Value: []byte("live")}).FirstErr(); err != nil {
		t.Fatalf("produce while the token lives: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := oneRecordProduce(t, "session", b.meta.Image().Topics["session"].ID, -1, 1000).RequestWith(attempt, cl)
		switch {
		case err == nil && resp.Topics[0].Partitions[0].ErrorCode == 0:
			return errors.New("the token's connection still produces")
		case errors.Is(err, kerr.SaslAuthenticationFailed):
			if time.Now().UnixMilli() < expiry {
				t.Fatalf("the token's session ended before the token expired at %d", expiry)
			}
			return nil
		case err == nil:
			t.Fatalf("produce as the token expires: %v; want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
		}
		return fmt.Errorf("produce as the token expires: %w", err)
	})
}

// TestDelegationTokensCluster: on a 3-node cluster a token created through node 1 is renewed
// through node 3 at once (which catches up with the controller to find it), authenticates on
// every node, and once expired through node 2 authenticates on none.
func TestDelegationTokensCluster(t *testing.T) {
	t.Parallel()
	bs := startInProcessCluster(t, 3, fastReplication, func(c *Config) {
		for _, o := range []string{
			"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
			"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + authzJAAS,
			"delegation.token.secret.key=" + tokenSecret,
		} {
			if err := c.Override(o); err != nil {
				t.Fatal(err)
			}
		}
	})
	waitUnfenced(t, bs)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := make([]*kgo.Client, len(bs))
	for i, b := range bs {
		alice[i] = userClient(t, b, "alice")
	}
	created, ok := brokerRequest(t, ctx, alice[0], bs[0], kmsg.NewPtrCreateDelegationTokenRequest()).(*kmsg.CreateDelegationTokenResponse)
	if !ok || created.ErrorCode != 0 {
		t.Fatalf("create through node 1: %+v", created)
	}
	renew := kmsg.NewPtrRenewDelegationTokenRequest()
	renew.HMAC, renew.RenewTimeMillis = created.HMAC, 60_000
	renewed, ok := brokerRequest(t, ctx, alice[2], bs[2], renew).(*kmsg.RenewDelegationTokenResponse)
	if !ok || renewed.ErrorCode != 0 {
		t.Fatalf("renew through node 3 right after the create: %+v", renewed)
	}
	ping := func(b *Broker) error {
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, saslClient(t, b, tokenAuth(created.TokenID, created.HMAC)))
		return err
	}
	for _, b := range bs {
		testutil.WaitFor(t, 10*time.Second, func() error { return ping(b) })
	}
	expire := kmsg.NewPtrExpireDelegationTokenRequest()
	expire.HMAC, expire.ExpiryPeriodMillis = created.HMAC, -1
	if expired, ok := brokerRequest(t, ctx, alice[1], bs[1], expire).(*kmsg.ExpireDelegationTokenResponse); !ok || expired.ErrorCode != 0 {
		t.Fatalf("expire through node 2: %+v", expired)
	}
	for _, b := range bs {
		testutil.WaitFor(t, 10*time.Second, func() error {
			if err := ping(b); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				return fmt.Errorf("node %d: authenticating with the expired token: %v; want SASL_AUTHENTICATION_FAILED", b.cfg.NodeID, err)
			}
			return nil
		})
	}
}

// TestDelegationTokensOverSSL: on an SSL listener a client with a certificate may create a
// token, owned by its certificate's principal; one without (User:ANONYMOUS) may not, as Kafka
// refuses token requests on 1-way SSL.
func TestDelegationTokensOverSSL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca := testcerts.NewCA(t, t.TempDir())
	server, bob := ca.Server(t, "broker"), ca.Client(t, "bob")
	b := startBroker(t, "netpoll", t.TempDir(),
		"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"ssl.keystore.type=PEM", "ssl.keystore.location="+server.KeystoreFile,
		"ssl.truststore.type=PEM", "ssl.truststore.location="+ca.CertFile,
		"listener.name.ssl.ssl.client.auth=requested",
		"delegation.token.secret.key="+tokenSecret)
	client := func(certs ...tls.Certificate) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.ListenerAddr("SSL").String()), kgo.RequestRetries(0),
			kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: certs}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	created := createToken(t, ctx, client(bob.TLS), "")
	if created.ErrorCode != 0 || created.PrincipalName != "CN=bob,O=ringbroker" {
		t.Fatalf("create with a client certificate: %v, owner %q; want the certificate's principal", kerr.ErrorForCode(created.ErrorCode), created.PrincipalName)
	}
	wantCode(t, "create without a client certificate", createToken(t, ctx, client(), "").ErrorCode, kerr.DelegationTokenRequestNotAllowed)
}
