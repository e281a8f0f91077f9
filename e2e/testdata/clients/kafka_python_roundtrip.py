"""Round trip through a broker with kafka-python: create a topic, produce keyed records with a
header (gzip, acks=all), consume them back in a consumer group, commit, and print "OK <n>".

Environment: BOOTSTRAP, TOPIC, GROUP, COUNT; for a SASL listener also SECURITY_PROTOCOL
(SASL_PLAINTEXT or SASL_SSL), SASL_MECHANISM, SASL_USERNAME, SASL_PASSWORD and, over TLS,
SSL_CAFILE.
"""
import os
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

bootstrap = os.environ["BOOTSTRAP"]
topic = os.environ["TOPIC"]
group = os.environ["GROUP"]
count = int(os.environ["COUNT"])

security = {}
if "SECURITY_PROTOCOL" in os.environ:
    security = dict(security_protocol=os.environ["SECURITY_PROTOCOL"],
                    sasl_mechanism=os.environ["SASL_MECHANISM"],
                    sasl_plain_username=os.environ["SASL_USERNAME"],
                    sasl_plain_password=os.environ["SASL_PASSWORD"])
    if "SSL_CAFILE" in os.environ:
        security["ssl_cafile"] = os.environ["SSL_CAFILE"]

admin = KafkaAdminClient(bootstrap_servers=bootstrap, **security)
admin.create_topics([NewTopic(topic, 3, 1)])
admin.close()

producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", acks="all", **security)
for i in range(count):
    producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)])
producer.flush()
producer.close()

consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         consumer_timeout_ms=20000, **security)
seen = set()
for m in consumer:
    i = int(m.key[1:])
    if m.value != b"v%d" % i or m.headers != [("h", b"%d" % i)]:
        print("BAD record", m, file=sys.stderr)
        sys.exit(1)
    seen.add(i)
    if len(seen) == count:
        break
consumer.commit()
consumer.close()
if len(seen) != count:
    print("consumed %d of %d" % (len(seen), count), file=sys.stderr)
    sys.exit(1)
print("OK %d" % len(seen))
