// Package quota is the logic of Kafka's client quotas and connection quotas, without I/O: the
// broker feeds it times, sizes and addresses and acts on what it answers.
//
// Client quotas are set with AlterClientQuotas for entities of a user and/or a client id, or of
// an IP, each part a name or the default; a Store holds them (Set and Remove replay the metadata
// records, Plan validates a request and says which records to write, Describe answers
// DescribeClientQuotas) and Resolve finds the one that applies to a client by Kafka's eight
// levels of precedence, from /config/users/<user>/clients/<client-id> down to
// /config/clients/<default>.
//
// ClientQuotas measures clients against them as Kafka's quota managers do: producer and
// consumer bytes and handler-thread time as rates over quota.window.num samples of
// quota.window.size.seconds (defaults 11 × 1 s), partition mutations with a token bucket. Each
// client is measured under its own sensor even when it shares a default quota, and the answer is
// a throttle time for the response's throttle_time_ms, after which the broker resumes reading
// from the connection; strict mutation quotas refuse with THROTTLING_QUOTA_EXCEEDED instead.
// Sensors idle for an hour are dropped.
//
// ConnectionQuotas is Kafka's ConnectionQuotas: max.connections per listener and per broker,
// max.connections.per.ip with its overrides, max.connection.creation.rate per listener and per
// broker, which delays accepting rather than refusing, and the connection_creation_rate quotas
// of IP entities, which close the connection after a delay.
//
// Time comes from an injected Clock; nothing here reads the wall clock by itself except by
// defaulting a nil Clock to time.Now.
package quota
