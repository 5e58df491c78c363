// Package conformance holds tests that run against a real Apache Kafka 4.3.1
// broker and Java fixtures built with Maven. They are compiled only with the
// build tag "conformance"; run them with `make conformance`.
package conformance
