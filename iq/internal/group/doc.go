// Package group turns a Kafka Streams application's group, as the brokers
// describe it (DescribeGroups on the classic rebalance protocol,
// StreamsGroupDescribe on the streams protocol), into routing: the
// instances, their zones and their active and standby partitions, each
// store's source topics (or why the group cannot tell them), and the
// standbys' lag bounds from the changelogs' end offsets. It is internal
// to package iq, which converts its results to iq's model.
package group
