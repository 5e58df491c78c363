// Package retry classifies Kafka client errors as transient (worth retrying
// on a fresh connection) or not, and provides a full-jitter exponential
// backoff policy.
package retry
