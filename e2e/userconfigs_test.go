package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// configCommand runs kafka-configs (kafka.admin.ConfigCommand) as the super user on the
// SASL_PLAINTEXT listener and returns what it printed.
func (a *authorizedBroker) configCommand(t *testing.T, args ...string) string {
	t.Helper()
	return runJava(t, "kafka.admin.ConfigCommand",
		append([]string{"--bootstrap-server", a.saslPlaintext, "--command-config", a.superProps}, args...)...).stdout
}

// TestUserClientConfigs manages users and client quotas with Apache Kafka's kafka-configs, as
// a super user over SASL on a broker with the StandardAuthorizer:
//   - a SCRAM-SHA-256 credential added with --entity-type users (default iterations, 4096)
//     lets the new user authenticate, --describe shows its mechanism, and --delete-config
//     takes it away again (and it is no longer described);
//   - quotas of a user, of the default client id and of a user's client id are described
//     back, each under the entity Kafka names it by;
//   - --describe --entity-type users lists every user's quotas and SCRAM mechanisms;
//   - DescribeUserScramCredentials naming a user twice and an unknown user answers each
//     once, with Kafka's error codes and messages.
func TestUserClientConfigs(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		const (
			user, password = "carol", "carol-secret"
			clientID       = "svc"
		)
		a := startAuthorized(t, tg)
		users := func(args ...string) []string {
			t.Helper()
			return a.configLines(t, append([]string{"--entity-type", "users"}, args...)...)
		}

		t.Run("SCRAM credential", func(t *testing.T) {
			out := a.configCommand(t, "--alter", "--add-config", "SCRAM-SHA-256=[password="+password+"]", "--entity-type", "users", "--entity-name", user)
			if want := "Completed updating config for user " + user + "."; strings.TrimSpace(out) != want {
				t.Fatalf("kafka-configs --alter SCRAM-SHA-256 printed %q, want %q", out, want)
			}
			testutil.WaitFor(t, aclWait, func() error { return pingOnce(a.saslPlaintext, kgo.SASL(scramSHA256(user, password))) })
			wantLines(t, "--describe --entity-name "+user, users("--describe", "--entity-name", user),
				"SCRAM credential configs for user-principal '"+user+"' are SCRAM-SHA-256=iterations=4096")
			if err := pingOnce(a.saslPlaintext, kgo.SASL(scramSHA512(user, password))); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s authenticating with SCRAM-SHA-512, which he has no credential for: %v; want SASL_AUTHENTICATION_FAILED", user, err)
			}
		})

		t.Run("user quota", func(t *testing.T) {
			out := a.configCommand(t, "--alter", "--add-config", "consumer_byte_rate=1048576,producer_byte_rate=524288", "--entity-type", "users", "--entity-name", plainUser)
			if want := "Completed updating config for user " + plainUser + "."; strings.TrimSpace(out) != want {
				t.Fatalf("kafka-configs --alter quotas of user %s printed %q, want %q", plainUser, out, want)
			}
			wantLines(t, "--describe --entity-name "+plainUser, users("--describe", "--entity-name", plainUser),
				"Quota configs for user-principal '"+plainUser+"' are consumer_byte_rate=1048576.0, producer_byte_rate=524288.0")
		})

		t.Run("default client quota", func(t *testing.T) {
			out := a.configCommand(t, "--alter", "--add-config", "consumer_byte_rate=2097152", "--entity-type", "clients", "--entity-default")
			if want := "Completed updating default config for clients in the cluster."; strings.TrimSpace(out) != want {
				t.Fatalf("kafka-configs --alter --entity-default printed %q, want %q", out, want)
			}
			wantLines(t, "--describe --entity-type clients --entity-default",
				a.configLines(t, "--describe", "--entity-type", "clients", "--entity-default"),
				"Quota configs for the default client-id are consumer_byte_rate=2097152.0")
		})

		t.Run("user and client quota", func(t *testing.T) {
			entity := []string{"--entity-type", "users", "--entity-name", plainUser, "--entity-type", "clients", "--entity-name", clientID}
			a.configCommand(t, append([]string{"--alter", "--add-config", "request_percentage=50"}, entity...)...)
			wantLines(t, "--describe of user and client", a.configLines(t, append([]string{"--describe"}, entity...)...),
				fmt.Sprintf("Quota configs for user-principal '%s', client-id '%s' are request_percentage=50.0", plainUser, clientID))
		})

		t.Run("all users", func(t *testing.T) {
			wantLines(t, "--describe --entity-type users", users("--describe"),
				"Quota configs for user-principal '"+plainUser+"' are consumer_byte_rate=1048576.0, producer_byte_rate=524288.0",
				fmt.Sprintf("SCRAM credential configs for user-principal '%s' are SCRAM-SHA-256=iterations=%d, SCRAM-SHA-512=iterations=%d", scramUser, scramIterations, scramIterations),
				"SCRAM credential configs for user-principal '"+user+"' are SCRAM-SHA-256=iterations=4096")
		})

		t.Run("DescribeUserScramCredentials", func(t *testing.T) {
			cl := a.Client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
			for _, name := range []string{user, "nobody", user} {
				u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
				u.Name = name
				req.Users = append(req.Users, u)
			}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("DescribeUserScramCredentials: %v", err)
			}
			got := map[string]string{}
			for _, r := range resp.Results {
				got[r.User] = fmt.Sprintf("%d %s", r.ErrorCode, deref(r.ErrorMessage))
			}
			// Kafka's ScramImage.describe: one result per user named, a user named twice refused.
			want := map[string]string{
				user:     fmt.Sprintf("%d Cannot describe SCRAM credentials for the same user twice in a single request: %s", kerr.DuplicateResource.Code, user),
				"nobody": fmt.Sprintf("%d Attempt to describe a user credential that does not exist: nobody", kerr.ResourceNotFound.Code),
			}
			if len(resp.Results) != len(want) || !maps.Equal(got, want) {
				t.Fatalf("DescribeUserScramCredentials of %s, nobody, %s: %d results %q; want %q", user, user, len(resp.Results), got, want)
			}
		})

		t.Run("delete SCRAM credential", func(t *testing.T) {
			a.configCommand(t, "--alter", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", user)
			testutil.WaitFor(t, aclWait, func() error {
				if err := pingOnce(a.saslPlaintext, kgo.SASL(scramSHA256(user, password))); !errors.Is(err, kerr.SaslAuthenticationFailed) {
					return fmt.Errorf("%s authenticating after his credential was deleted: %v; want SASL_AUTHENTICATION_FAILED", user, err)
				}
				return nil
			})
			// Kafka answers RESOURCE_NOT_FOUND for the user, which the Admin client leaves out of
			// the users it lists: nothing is printed.
			wantLines(t, "--describe --entity-name "+user+" after --delete-config", users("--describe", "--entity-name", user))
		})
	})
}

// configLines runs kafka-configs as the super user and returns the lines it printed, sorted,
// with the entries after " are " sorted too: Kafka prints a user's quotas and SCRAM mechanisms
// in the order of Java hash maps.
func (a *authorizedBroker) configLines(t *testing.T, args ...string) []string {
	t.Helper()
	var lines []string
	for _, line := range strings.Split(a.configCommand(t, args...), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if head, entries, ok := strings.Cut(line, " are "); ok {
			kvs := strings.Split(entries, ", ")
			slices.Sort(kvs)
			line = head + " are " + strings.Join(kvs, ", ")
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	return lines
}

// wantLines fails unless kafka-configs printed exactly the lines want, in any order.
func wantLines(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("kafka-configs %s printed\n\t%s\nwant\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
