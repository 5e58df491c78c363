// Package iq routes Kafka Streams interactive queries from Go: it maps a key
// to its partition exactly as Java's Kafka Streams does (murmur2), finds the
// active and standby hosts for that partition, and orders them by a policy
// that may allow fresh-enough standby replicas (KIP-535).
package iq
