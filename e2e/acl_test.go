package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"ringbroker/internal/testutil"
)

// The super user of an authorized broker: a PLAIN user of the listeners' JAAS config (see
// startSecured). User:ANONYMOUS, the principal of the PLAINTEXT and controller listeners, is a
// super user too, so the harness's own admin calls and Kafka's broker-to-controller traffic
// pass the authorizer.
const (
	superUser     = "admin"
	superPassword = "admin-secret"
	// standardAuthorizer is Kafka's KRaft authorizer, authorizer.class.name's value.
	standardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	// aclRecords is how many records the readable topics hold.
	aclRecords = 10
	// aclWait bounds how long an ACL change may take to reach the authorizer that checks
	// requests (on Kafka, the broker applies the controller's record a moment after
	// CreateAcls or DeleteAcls answers).
	aclWait = 15 * time.Second
)

// authorizedBroker is a secured broker with the StandardAuthorizer and nothing allowed to
// anyone but the super users until ACLs say so, and the Java client settings of its SASL users.
type authorizedBroker struct {
	*securedBroker
	// superProps, aliceProps and bobProps are Java client configs for the SASL_PLAINTEXT
	// listener: the super user and alice with PLAIN, bob with SCRAM-SHA-256.
	superProps, aliceProps, bobProps string
}

// startAuthorized starts the target's secured broker with the StandardAuthorizer,
// super.users=User:admin;User:ANONYMOUS and allow.everyone.if.no.acl.found=false.
func startAuthorized(t *testing.T, tg target, overrides ...string) *authorizedBroker {
	t.Helper()
	s := startSecured(t, tg, append([]string{
		"authorizer.class.name=" + standardAuthorizer,
		"super.users=User:" + superUser + ";User:ANONYMOUS",
		"allow.everyone.if.no.acl.found=false",
		"group.initial.rebalance.delay.ms=0",
	}, overrides...)...)
	plainProps := func(name, user, pass string) string {
		return javaProps(t, name, "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
			fmt.Sprintf(`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s";`, user, pass))
	}
	return &authorizedBroker{
		securedBroker: s,
		superProps:    plainProps("super", superUser, superPassword),
		aliceProps:    plainProps("alice", plainUser, plainPassword),
		bobProps: javaProps(t, "bob", "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-256",
			scramJAASLine(scramUser, scramPassword)),
	}
}

// aliceAuth is alice's SASL mechanism for franz-go: PLAIN.
func aliceAuth() sasl.Mechanism { return plainAuth(plainUser, plainPassword) }

// bobAuth is bob's SASL mechanism for franz-go: SCRAM-SHA-256.
func bobAuth() sasl.Mechanism { return scramSHA256(scramUser, scramPassword) }

// aclCommand runs kafka-acls (org.apache.kafka.tools.AclCommand, what bin/kafka-acls.sh runs
// in Kafka 4.1) as the super user on the SASL_PLAINTEXT listener and returns what it printed.
func (a *authorizedBroker) aclCommand(t *testing.T, args ...string) string {
	t.Helper()
	return runJava(t, "org.apache.kafka.tools.AclCommand",
		append([]string{"--bootstrap-server", a.saslPlaintext, "--command-config", a.superProps}, args...)...).stdout
}

// listTopics runs kafka-topics --list with the client settings in props and returns the
// topic names it printed, sorted.
func (a *authorizedBroker) listTopics(t *testing.T, props string) []string {
	t.Helper()
	out := runJava(t, "org.apache.kafka.tools.TopicCommand",
		"--bootstrap-server", a.saslPlaintext, "--command-config", props, "--list").stdout
	names := strings.Fields(out)
	sort.Strings(names)
	return names
}

// TestAclCommand grants, denies, lists and removes ACLs with Apache Kafka's kafka-acls as a
// super user over SASL, and checks with the Java console tools, kafka-topics and franz-go,
// authenticating as alice (PLAIN) and bob (SCRAM-SHA-256), that each takes effect as on
// Kafka:
//   - alice, allowed Read on a topic and a group, consumes it in that group; in another
//     group the console consumer fails with GroupAuthorizationException;
//   - bob, without any ACL on that topic, gets TopicAuthorizationException;
//   - bob, allowed Write only, produces with the (idempotent) console producer but his fetch
//     gets TOPIC_AUTHORIZATION_FAILED;
//   - a DENY for alice beats an ALLOW for User:*, but denies only Read: she still sees the
//     topic listed, as Describe is implied by the allowed Read;
//   - the super user lists every topic; bob and alice only those they may describe;
//   - --list shows every ACL, --list --topic one resource's only; --remove --force of
//     alice's Read on her topic removes that ACL alone (her group's stays) and takes her
//     access away, and of her DENY gives her the other topic back.
func TestAclCommand(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		const (
			readTopic   = "acl-read"   // alice: Read (and her group acl-group)
			writeTopic  = "acl-write"  // bob: Write only
			denyTopic   = "acl-deny"   // User:*: Read; alice: Read denied
			hiddenTopic = "acl-hidden" // no ACL
			group       = "acl-group"
		)
		a := startAuthorized(t, tg)
		for _, topic := range []string{readTopic, writeTopic, denyTopic, hiddenTopic} {
			a.CreateTopic(t, topic, 1)
		}
		// The PLAINTEXT listener's User:ANONYMOUS is a super user.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		produceValues(ctx, t, a.Client(t), readTopic, "r", aclRecords)
		produceValues(ctx, t, a.Client(t), denyTopic, "d", aclRecords)
		var want []string
		for i := range aclRecords {
			want = append(want, fmt.Sprintf("r%d", i))
		}

		topicPattern := func(name string) string {
			return "ResourcePattern(resourceType=TOPIC, name=" + name + ", patternType=LITERAL)"
		}
		groupPattern := "ResourcePattern(resourceType=GROUP, name=" + group + ", patternType=LITERAL)"
		aliceRead := "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
		bobWrite := "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)"
		anyoneRead := "(principal=User:*, host=*, operation=READ, permissionType=ALLOW)"
		aliceDenied := "(principal=User:alice, host=*, operation=READ, permissionType=DENY)"

		out := a.aclCommand(t, "--add", "--allow-principal", "User:"+plainUser, "--operation", "Read", "--topic", readTopic, "--group", group)
		for _, p := range []string{topicPattern(readTopic), groupPattern} {
			if want := "Adding ACLs for resource `" + p + "`: \n \t" + aliceRead; !strings.Contains(out, want) {
				t.Fatalf("kafka-acls --add printed:\n%s\nwant it to contain:\n%s", out, want)
			}
		}
		a.aclCommand(t, "--add", "--allow-principal", "User:"+scramUser, "--operation", "Write", "--topic", writeTopic)
		out = a.aclCommand(t, "--add", "--allow-principal", "User:*", "--deny-principal", "User:"+plainUser, "--operation", "Read", "--topic", denyTopic)
		for _, entry := range []string{anyoneRead, aliceDenied} {
			if !strings.Contains(out, entry) {
				t.Fatalf("kafka-acls --add with --allow-principal and --deny-principal printed:\n%s\nwant the entry %s", out, entry)
			}
		}

		t.Run("list", func(t *testing.T) {
			all := parseAclList(t, a.aclCommand(t, "--list"))
			wantAll := map[string][]string{
				topicPattern(readTopic):  {aliceRead},
				groupPattern:             {aliceRead},
				topicPattern(writeTopic): {bobWrite},
				topicPattern(denyTopic):  {anyoneRead, aliceDenied},
			}
			checkAclList(t, "--list", all, wantAll)
			one := parseAclList(t, a.aclCommand(t, "--list", "--topic", denyTopic))
			checkAclList(t, "--list --topic "+denyTopic, one, map[string][]string{topicPattern(denyTopic): {anyoneRead, aliceDenied}})
		})

		// The ACLs have reached the authorizer once alice reads her topic.
		testutil.WaitFor(t, aclWait, func() error { return readAs(a.saslPlaintext, aliceAuth(), readTopic, aclRecords) })

		t.Run("alice consumes in her group", func(t *testing.T) {
			res := runJava(t, "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", a.saslPlaintext,
				"--consumer.config", a.aliceProps, "--topic", readTopic, "--group", group, "--from-beginning",
				"--max-messages", fmt.Sprint(aclRecords), "--timeout-ms", "30000")
			if got := strings.Fields(res.stdout); !slices.Equal(got, want) {
				t.Fatalf("alice's console consumer printed %q, want %q; its log:\n%s", got, want, tail(res.stderr, 4<<10))
			}
		})

		t.Run("alice in another group", func(t *testing.T) {
			const other = "acl-other-group"
			log := consumeRefused(t, a.saslPlaintext, a.aliceProps, readTopic, "--group", other, "--from-beginning")
			if want := "org.apache.kafka.common.errors.GroupAuthorizationException: Not authorized to access group: " + other; !strings.Contains(log, want) {
				t.Fatalf("alice's console consumer in group %s ended without %q:\n%s", other, want, tail(log, 4<<10))
			}
		})

		t.Run("bob without Read", func(t *testing.T) {
			log := consumeRefused(t, a.saslPlaintext, a.bobProps, readTopic, "--partition", "0", "--offset", "earliest")
			if want := "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: [" + readTopic + "]"; !strings.Contains(log, want) {
				t.Fatalf("bob's console consumer of %s ended without %q:\n%s", readTopic, want, tail(log, 4<<10))
			}
			if err := readAs(a.saslPlaintext, bobAuth(), readTopic, aclRecords); !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Fatalf("bob reading %s with franz-go: %v; want TOPIC_AUTHORIZATION_FAILED", readTopic, err)
			}
		})

		t.Run("bob with Write only", func(t *testing.T) {
			var in strings.Builder
			for i := range aclRecords {
				fmt.Fprintf(&in, "bob-%d\n", i)
			}
			runJavaStdin(t, []byte(in.String()), "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", a.saslPlaintext,
				"--producer.config", a.bobProps, "--topic", writeTopic)
			if got := a.EndOffsets(t, writeTopic)[0]; got != aclRecords {
				t.Fatalf("%s ends at %d after bob's console producer; want %d", writeTopic, got, aclRecords)
			}
			if err := readAs(a.saslPlaintext, bobAuth(), writeTopic, aclRecords); !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Fatalf("bob reading %s, which he may only write: %v; want TOPIC_AUTHORIZATION_FAILED", writeTopic, err)
			}
		})

		t.Run("deny beats allow", func(t *testing.T) {
			if err := readAs(a.saslPlaintext, bobAuth(), denyTopic, aclRecords); err != nil {
				t.Fatalf("bob reading %s, allowed to User:*: %v", denyTopic, err)
			}
			if err := readAs(a.saslPlaintext, aliceAuth(), denyTopic, aclRecords); !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Fatalf("alice reading %s, denied to her: %v; want TOPIC_AUTHORIZATION_FAILED", denyTopic, err)
			}
		})

		t.Run("topic lists", func(t *testing.T) {
			all := a.listTopics(t, a.superProps)
			for _, topic := range []string{readTopic, writeTopic, denyTopic, hiddenTopic} {
				if !slices.Contains(all, topic) {
					t.Fatalf("kafka-topics --list as the super user printed %q, without %s", all, topic)
				}
			}
			if got, want := a.listTopics(t, a.bobProps), []string{denyTopic, writeTopic}; !slices.Equal(got, want) {
				t.Fatalf("kafka-topics --list as bob printed %q; want %q, the topics he may describe", got, want)
			}
			if got, want := metadataTopics(t, a.saslPlaintext, aliceAuth()), []string{denyTopic, readTopic}; !slices.Equal(got, want) {
				t.Fatalf("Metadata for all topics as alice lists %q; want %q (a DENY of Read leaves the Describe implied by User:*'s Read)", got, want)
			}
		})

		t.Run("remove", func(t *testing.T) {
			a.aclCommand(t, "--remove", "--force", "--allow-principal", "User:"+plainUser, "--operation", "Read", "--topic", readTopic)
			// The topic's only ACL is gone; alice's on her group, with the same principal and
			// operation, stays.
			checkAclList(t, "--list after --remove", parseAclList(t, a.aclCommand(t, "--list")), map[string][]string{
				groupPattern:             {aliceRead},
				topicPattern(writeTopic): {bobWrite},
				topicPattern(denyTopic):  {anyoneRead, aliceDenied},
			})
			testutil.WaitFor(t, aclWait, func() error {
				if err := readAs(a.saslPlaintext, aliceAuth(), readTopic, aclRecords); !errors.Is(err, kerr.TopicAuthorizationFailed) {
					return fmt.Errorf("alice reading %s after her Read was removed: %v; want TOPIC_AUTHORIZATION_FAILED", readTopic, err)
				}
				return nil
			})
			a.aclCommand(t, "--remove", "--force", "--deny-principal", "User:"+plainUser, "--operation", "Read", "--topic", denyTopic)
			testutil.WaitFor(t, aclWait, func() error { return readAs(a.saslPlaintext, aliceAuth(), denyTopic, aclRecords) })
		})
	})
}

// parseAclList reads kafka-acls --list output into the entries listed for each resource
// pattern, sorted.
func parseAclList(t *testing.T, out string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	resource := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Current ACLs for resource `"):
			rest := strings.TrimPrefix(line, "Current ACLs for resource `")
			p, ok := strings.CutSuffix(rest, "`:")
			if !ok {
				t.Fatalf("kafka-acls --list: resource line %q does not end with \"`:\"", line)
			}
			resource = p
			got[resource] = nil
		case strings.HasPrefix(line, "\t"):
			if resource == "" {
				t.Fatalf("kafka-acls --list: entry %q before any resource line in:\n%s", line, out)
			}
			got[resource] = append(got[resource], strings.TrimPrefix(line, "\t"))
		case strings.TrimSpace(line) != "":
			t.Fatalf("kafka-acls --list: unexpected line %q in:\n%s", line, out)
		}
	}
	for _, entries := range got {
		sort.Strings(entries)
	}
	return got
}

// checkAclList fails unless the listed ACLs are exactly want (entries sorted).
func checkAclList(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("kafka-acls %s listed %d resources %v; want %d: %v", what, len(got), got, len(want), want)
	}
	for p, entries := range want {
		entries = slices.Sorted(slices.Values(entries))
		if !slices.Equal(got[p], entries) {
			t.Fatalf("kafka-acls %s listed for `%s` %q; want %q", what, p, got[p], entries)
		}
	}
}

// readAs reads partition 0 of topic from the start as the principal of mech on the SASL
// listener addr, with a new franz-go client, and returns nil once it has read want records,
// or the first error the client reports (an authorization error among them).
func readAs(addr string, mech sasl.Mechanism, topic string, want int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return fmt.Errorf("new client for %s: %w", addr, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %d of %d records of %s: %w", got, want, topic, err)
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("read %s: %w", topic, err)
		}
		got += fs.NumRecords()
	}
	return nil
}

// metadataTopics asks for the metadata of all topics as the principal of mech on the SASL
// listener addr and returns the topic names listed, sorted.
func metadataTopics(t *testing.T, addr string, mech sasl.Mechanism) []string {
	t.Helper()
	cl := franz(t, addr, kgo.SASL(mech))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest() // Topics nil: all topics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("Metadata for all topics on %s: %v", addr, err)
	}
	var names []string
	for _, topic := range resp.Topics {
		if topic.ErrorCode != 0 {
			t.Fatalf("Metadata for all topics: topic %s has error code %d", deref(topic.Topic), topic.ErrorCode)
		}
		names = append(names, deref(topic.Topic))
	}
	sort.Strings(names)
	return names
}

// consumeRefused runs the console consumer of topic with the client settings in props and the
// extra options, expecting the broker to refuse it, and returns its log. The console consumer
// of Kafka 4.1 logs the exception that ended it and exits 0, having printed no record.
func consumeRefused(t *testing.T, addr, props, topic string, extra ...string) string {
	t.Helper()
	args := append([]string{"--bootstrap-server", addr, "--consumer.config", props, "--topic", topic,
		"--max-messages", fmt.Sprint(aclRecords), "--timeout-ms", "20000"}, extra...)
	res := runJava(t, "org.apache.kafka.tools.consumer.ConsoleConsumer", args...)
	if res.stdout != "" || !strings.Contains(res.stderr, "Processed a total of 0 messages") {
		t.Fatalf("the console consumer of %s with %s printed %q; want no record. Its log:\n%s",
			topic, filepath.Base(props), res.stdout, tail(res.stderr, 4<<10))
	}
	return res.stderr
}
