// Package e2e holds the end-to-end and compatibility tests of ringbroker. They start
// real processes (bin/ringbroker, or Apache Kafka as the reference broker) and drive
// them with real clients: kcat (librdkafka), Apache Kafka's own command-line tools, its Java
// clients and Kafka Streams (programs in testdata/, compiled once before the tests),
// franz-go, sarama, kafka-python and kafkajs. Before the tests, TestMain also records the
// classes Kafka's tools load into a class-data-sharing archive that every JVM of the suite
// maps, which halves a tool's start-up.
//
// E2E_BROKER picks the target: unset or "ringbroker" runs every test against
// ringbroker once per I/O backend (io=uring and io=netpoll); "kafka" runs them against
// an Apache Kafka 4.1.1 single-node KRaft broker started from .cache/kafka/libs
// (`make deps` fetches it). Every test is written and checked against Kafka first, so a
// failure against ringbroker is a difference from Kafka.
package e2e
