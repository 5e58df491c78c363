// Package sdk makes segmentio/kafka-go clients zone-aware and resilient on
// multi-AZ Kafka-compatible clusters.
//
// It stamps the WarpStream client ID
// (warpstream_session_id=<uuid>,warpstream_az=<az>,warpstream_interzone_lb=true),
// wraps kafka.Writer and kafka.Reader so that the connection closes caused by
// interzone load balancing are retried instead of surfacing to the caller, and
// dials through a connection policy that limits and jitters reconnects.
package sdk
