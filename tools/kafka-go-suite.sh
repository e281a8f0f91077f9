#!/usr/bin/env bash
# `make kafka-go-suite`: segmentio/kafka-go's own test suite (the one its authors run against a
# Kafka in docker) against ringbroker or, for reference, Apache Kafka 4.1.1.
#
# BROKER=uring|netpoll|kafka (default uring). The suite dials localhost:9092 (PLAINTEXT) and
# localhost:9093 (SASL_PLAINTEXT) itself, so both ports must be free. The broker is set up as
# kafka-go's docker-compose-400.yml sets up Kafka: auto-created topics, a StandardAuthorizer
# allowing everyone without ACLs, PLAIN user adminplain and SCRAM users adminscram256,
# adminscram512 and adminscram. Two subtests are skipped on every broker: they call a
# ConsumerGroup built without its connect function and panic, which ends the whole package.
# Writes the suite's output and a summary of its failures to $OUT.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BROKER="${BROKER:-uring}"
KAFKA_GO_VERSION="${KAFKA_GO_VERSION:-v0.4.51}"
KAFKA_LIBS="${KAFKA_LIBS:-.cache/kafka/libs}"
OUT="${OUT:-results/kafka-go-suite-$BROKER-$(date +%Y%m%d-%H%M%S)}"
SKIP='TestReaderConsumerGroup/(verify_offset_committed|consumer_group_commits_on_close)'
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
PID=
cleanup() {
	if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT
die() { echo "kafka-go-suite: $*" >&2; exit 1; }

for port in 9092 9093 9094; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "port $port is in use: kafka-go's suite needs 9092 and 9093, the controller 9094"
	fi
done

src=$(go mod download -json "github.com/segmentio/kafka-go@$KAFKA_GO_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || die "download github.com/segmentio/kafka-go@$KAFKA_GO_VERSION failed"
cp -r "$src" "$WORK/kafka-go"
chmod -R u+w "$WORK/kafka-go"
(cd "$WORK/kafka-go" && go mod tidy >/dev/null 2>&1) || die "go mod tidy in kafka-go failed"

cat >"$WORK/server.properties" <<EOF
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094
advertised.listeners=PLAINTEXT://localhost:9092,SASL_PLAINTEXT://localhost:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9094
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$WORK/data
auto.create.topics.enable=true
delete.topic.enable=true
message.max.bytes=200000000
group.initial.rebalance.delay.ms=0
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
super.users=User:adminscram256;User:adminscram512;User:adminplain
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
sasl.mechanism.controller.protocol=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="adminplain" password="admin-secret" user_adminplain="admin-secret";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
mkdir -p "$WORK/data"
cid=MkU3OEVBNTcwNTJENDM2Qk
case "$BROKER" in
uring | netpoll)
	bin/ringbroker --io="$BROKER" --config "$WORK/server.properties" --override "cluster.id=$cid" \
		--override "metrics.listen=" >"$OUT/broker.log" 2>&1 &
	PID=$!
	;;
kafka)
	java -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool format -t "$cid" -c "$WORK/server.properties" >"$OUT/broker.log" 2>&1 ||
		die "format Kafka storage failed: see $OUT/broker.log"
	java -Xmx1G -Xms1G -cp "$KAFKA_LIBS/*" kafka.Kafka "$WORK/server.properties" >>"$OUT/broker.log" 2>&1 &
	PID=$!
	;;
*) die "BROKER=$BROKER; want uring, netpoll or kafka" ;;
esac

scram() { # USER MECHANISM PASSWORD
	java -cp "$KAFKA_LIBS/*" kafka.admin.ConfigCommand --bootstrap-server 127.0.0.1:9092 --alter \
		--add-config "$2=[password=$3]" --entity-type users --entity-name "$1" >>"$OUT/setup.log" 2>&1
}
for _ in $(seq 60); do
	scram adminscram256 SCRAM-SHA-256 admin-secret-256 && break
	kill -0 "$PID" 2>/dev/null || die "the broker exited: see $OUT/broker.log"
	sleep 1
done
scram adminscram512 SCRAM-SHA-512 admin-secret-512
scram adminscram SCRAM-SHA-256 admin-secret-256
scram adminscram SCRAM-SHA-512 admin-secret-512

echo "kafka-go $KAFKA_GO_VERSION suite against $BROKER; output in $OUT"
set +e
(cd "$WORK/kafka-go" && KAFKA_VERSION=4.0.0 KAFKA_SKIP_NETTEST=1 \
	go test -count=1 -timeout 15m -skip "$SKIP" ./... >"$OUT/suite.txt" 2>&1)
rc=$?
set -e
grep -E '^(--- FAIL|    --- FAIL|FAIL|ok |panic)' "$OUT/suite.txt" | grep -v '^ok ' >"$OUT/failures.txt" || true
echo "go test exit $rc; failures:"
cat "$OUT/failures.txt"
