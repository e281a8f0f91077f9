"""Transactions through a broker with confluent-kafka (librdkafka): create a topic of three
partitions; with one transactional producer commit COUNT records c0..c<COUNT-1>, abort COUNT
records a0..a<COUNT-1> (flushed to the log first), then commit one SENTINEL record per
partition. A read_committed consumer in a group reads every partition up to its sentinel. Prints
"COMMITTED <distinct> DUPLICATES <n> ABORTED <n>" and, when every committed record was read
once and no aborted one, "OK <COUNT>"; exits 1 otherwise.

Environment: BOOTSTRAP, TOPIC, GROUP, COUNT, SENTINEL.
"""
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3
# Seconds each transactional call, the topic creation and the read may take.
TIMEOUT = 30

bootstrap = os.environ["BOOTSTRAP"]
topic = os.environ["TOPIC"]
group = os.environ["GROUP"]
count = int(os.environ["COUNT"])
sentinel = os.environ["SENTINEL"].encode()


def call(what, fn, *args, **kwargs):
    """Runs one client call; a KafkaException it raises is raised again naming the call."""
    try:
        return fn(*args, **kwargs)
    except KafkaException as e:
        raise RuntimeError("%s: %s" % (what, e)) from e


def create_topic():
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]).values():
        call("create topic " + topic, future.result, TIMEOUT)


def produce():
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic + "-txn", "linger.ms": 5})
    call("init_transactions", producer.init_transactions, TIMEOUT)

    call("begin the committed transaction", producer.begin_transaction)
    for i in range(count):
        call("produce", producer.produce, topic, key=b"%d" % i, value=b"c%d" % i)
        producer.poll(0)
    call("commit", producer.commit_transaction, TIMEOUT)

    call("begin the aborted transaction", producer.begin_transaction)
    for i in range(count):
        call("produce", producer.produce, topic, key=b"%d" % i, value=b"a%d" % i)
        producer.poll(0)
    left = producer.flush(TIMEOUT)
    if left:
        raise RuntimeError("%d records of the aborted transaction not delivered in %ds" % (left, TIMEOUT))
    call("abort", producer.abort_transaction, TIMEOUT)

    call("begin the sentinel transaction", producer.begin_transaction)
    for p in range(PARTITIONS):
        call("produce", producer.produce, topic, value=sentinel, partition=p)
    call("commit the sentinels", producer.commit_transaction, TIMEOUT)


def consume():
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    call("subscribe", consumer.subscribe, [topic])
    committed, aborted, ended = {}, 0, set()
    deadline = time.monotonic() + TIMEOUT
    while len(ended) < PARTITIONS:
        if time.monotonic() > deadline:
            raise RuntimeError("read %d of %d partitions to their sentinel in %ds (%d committed records read)"
                               % (len(ended), PARTITIONS, TIMEOUT, len(committed)))
        m = consumer.poll(1.0)
        if m is None:
            continue
        if m.error():
            raise RuntimeError("consume: %s" % m.error())
        v = m.value()
        if v == sentinel:
            ended.add(m.partition())
        elif v.startswith(b"c"):
            committed[v] = committed.get(v, 0) + 1
        elif v.startswith(b"a"):
            aborted += 1
        else:
            raise RuntimeError("unexpected record %r at %d@%d" % (v, m.partition(), m.offset()))
    consumer.close()
    return committed, aborted


def main():
    try:
        create_topic()
        produce()
        committed, aborted = consume()
    except Exception as e:  # a failed step ends the script with its reason, not a traceback
        print("FAILED: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 1
    duplicates = sum(n - 1 for n in committed.values())
    print("COMMITTED %d DUPLICATES %d ABORTED %d" % (len(committed), duplicates, aborted))
    if len(committed) != count or duplicates or aborted:
        return 1
    print("OK %d" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
