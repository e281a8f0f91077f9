// Package bench is ringbroker's load generator: it runs OpenMessaging-style
// workloads (workload.go) against any Kafka-compatible cluster through
// franz-go's kgo, equally fair to ringbroker and to Apache Kafka, and reports
// and compares the results.
//
// Fixed-rate runs are open loop: a Pacer gives every record an intended send
// time from the schedule, the record carries it in its first StampSize value
// bytes, and both publish latency (ack time minus intended time) and
// end-to-end latency (consume time minus intended time) count from it, so a
// stall in the broker or the client shows up in the percentiles instead of
// silently slowing the schedule (coordinated omission).
//
// A workload of producerRate 0 means, as in the OpenMessaging Benchmark, the
// highest rate the consumers sustain: a RateController sets the producers'
// rate once a second, doubling it while producers and consumers keep up, going
// back under the rate last sustained when either falls short and climbing
// again towards the rate that failed, so the consumers stay within a fraction
// of a second of the producers and end-to-end latency measures the system
// rather than a backlog. The producers' own ceiling, consumers kept up or not,
// is Options.Unthrottled (ringbench run --unthrottled).
//
// Beside the workload a probe times the round trip of a request that costs a
// broker next to nothing (probe.go, ProbeStats): the floor the machine itself,
// shared by the clients and the broker, puts under every latency of the run.
// Over the measured period a run also reads how busy the machine's cores were
// and how many of them ringbench itself kept busy (MachineUsage): a rate that
// stops rising with every core busy is the machine's ceiling, clients
// included, not the broker's.
//
// Latencies go into log-linear Histograms (percentiles within 0.4 %, 1 µs to
// 60 s, mergeable). A Result is written as JSON; Compare prints results side
// by side with ratios and draws an HdrHistogram-style percentile chart as SVG
// inside an HTML page.
package bench
