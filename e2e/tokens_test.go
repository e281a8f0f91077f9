package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// tokenRow matches a token line of kafka-delegation-tokens' table: token id, HMAC in base64,
// owner, requester and renewers.
var tokenRow = regexp.MustCompile(`(?m)^(\S+)\s+(\S+)\s+(User:\S+)\s+(User:\S+)\s+(\[[^\]]*\])\s`)

// TestDelegationTokenCommand runs Kafka's kafka-delegation-tokens (DelegationTokenCommand)
// over SASL_PLAINTEXT with SCRAM-SHA-512: --create a token of the SCRAM user renewed by
// alice, --describe it by owner, --renew it for an hour; a franz-go client authenticating
// with the token (SCRAM-SHA-512 with tokenauth) and the Java console producer (SCRAM-SHA-256,
// tokenauth="true") produce, and the token's connection may not create tokens itself; after
// --expire at once, the token authenticates no more. ApiVersions lists the token APIs at
// Kafka 4.1.1's versions.
func TestDelegationTokenCommand(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		s := startSecured(t, tg, "delegation.token.secret.key=e2e-token-secret")
		props := javaProps(t, "tokens",
			"security.protocol=SASL_PLAINTEXT",
			"sasl.mechanism=SCRAM-SHA-512",
			scramJAASLine(scramUser, scramPassword))
		tool := func(args ...string) string {
			t.Helper()
			return runJava(t, "org.apache.kafka.tools.DelegationTokenCommand",
				append([]string{"--bootstrap-server", s.saslPlaintext, "--command-config", props}, args...)...).stdout
		}

		out := tool("--create", "--max-life-time-period", "-1", "--renewer-principal", "User:alice")
		row := tokenRow.FindStringSubmatch(out)
		if row == nil || !strings.Contains(out, "Created delegation token with tokenId : "+row[1]) {
			t.Fatalf("kafka-delegation-tokens --create printed %q; want the token created and its row", out)
		}
		id, hmac := row[1], row[2]
		if row[3] != "User:"+scramUser || row[4] != "User:"+scramUser || row[5] != "[User:alice]" {
			t.Fatalf("created token %s: owner %s, requester %s, renewers %s; want User:%s twice and [User:alice]", id, row[3], row[4], row[5], scramUser)
		}
		mac, err := base64.StdEncoding.DecodeString(hmac)
		if err != nil || len(mac) != 64 {
			t.Fatalf("token %s: HMAC %q is not 64 bytes in base64 (HMAC-SHA512): %v", id, hmac, err)
		}

		out = tool("--describe", "--owner-principal", "User:"+scramUser)
		if rows := tokenRow.FindAllStringSubmatch(out, -1); !strings.Contains(out, "Total number of tokens : 1") || len(rows) != 1 || rows[0][1] != id || rows[0][2] != hmac {
			t.Fatalf("kafka-delegation-tokens --describe printed %q; want token %s with its HMAC", out, id)
		}

		before := time.Now().UnixMilli()
		if out := tool("--renew", "--hmac", hmac, "--renew-time-period", "3600000"); !strings.Contains(out, "Completed renew operation. New expiry date : ") {
			t.Fatalf("kafka-delegation-tokens --renew printed %q", out)
		}
		owner := franz(t, s.saslPlaintext, kgo.SASL(scramSHA512(scramUser, scramPassword)))
		described, err := kmsg.NewPtrDescribeDelegationTokenRequest().RequestWith(ctx, owner)
		if err != nil || described.ErrorCode != 0 || len(described.TokenDetails) != 1 {
			t.Fatalf("DescribeDelegationToken after --renew: %v, %+v", err, described)
		}
		if exp := described.TokenDetails[0].ExpiryTimestamp; exp < before+3600_000 || exp > time.Now().UnixMilli()+3600_000 {
			t.Fatalf("token expires at %d after --renew for an hour; want %d..%d", exp, before+3600_000, time.Now().UnixMilli()+3600_000)
		}

		// The token APIs at Kafka 4.1.1's versions.
		versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, owner)
		if err != nil {
			t.Fatalf("ApiVersions: %v", err)
		}
		for _, want := range []kmsg.ApiVersionsResponseApiKey{{ApiKey: 38, MinVersion: 1, MaxVersion: 3},
			{ApiKey: 39, MinVersion: 1, MaxVersion: 2}, {ApiKey: 40, MinVersion: 1, MaxVersion: 2}, {ApiKey: 41, MinVersion: 1, MaxVersion: 3}} {
			if !slices.ContainsFunc(versions.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
				return k.ApiKey == want.ApiKey && k.MinVersion == want.MinVersion && k.MaxVersion == want.MaxVersion
			}) {
				t.Fatalf("ApiVersions does not list %s at versions %d-%d", kmsg.NameForKey(want.ApiKey), want.MinVersion, want.MaxVersion)
			}
		}

		const topic = "by-token"
		if _, err := kadm.NewClient(owner).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
		s.WaitTopic(t, topic, 1)
		auth := kgo.SASL(scram.Auth{User: id, Pass: hmac, IsToken: true}.AsSha512Mechanism())
		viaToken := franz(t, s.saslPlaintext, auth, kgo.RequiredAcks(kgo.AllISRAcks()))
		if err := viaToken.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("authenticated by a token")}).FirstErr(); err != nil {
			t.Fatalf("produce with the token: %v", err)
		}
		// The Java client's token login, as Kafka's documentation gives it.
		javaToken := javaProps(t, "token-client",
			"security.protocol=SASL_PLAINTEXT",
			"sasl.mechanism=SCRAM-SHA-256",
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="`+id+`" password="`+hmac+`" tokenauth="true";`)
		runJavaStdin(t, []byte("java, authenticated by a token\n"), "org.apache.kafka.tools.ConsoleProducer",
			"--bootstrap-server", s.saslPlaintext, "--producer.config", javaToken, "--topic", topic)
		if got := s.EndOffsets(t, topic)[0]; got != 2 {
			t.Fatalf("%s ends at %d after franz-go's and the Java console producer's records; want 2", topic, got)
		}
		create := kmsg.NewPtrCreateDelegationTokenRequest()
		create.MaxLifetimeMillis = -1
		if resp, err := create.RequestWith(ctx, viaToken); err != nil || resp.ErrorCode != kerr.DelegationTokenRequestNotAllowed.Code {
			t.Fatalf("CreateDelegationToken on a token's connection: %v, %+v; want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", err, resp)
		}

		if out := tool("--expire", "--hmac", hmac, "--expiry-time-period", "-1"); !strings.Contains(out, "Completed expire operation.") {
			t.Fatalf("kafka-delegation-tokens --expire printed %q", out)
		}
		if err := pingOnce(s.saslPlaintext, auth); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("authenticate with the expired token: %v; want SASL_AUTHENTICATION_FAILED", err)
		}
	})
}
