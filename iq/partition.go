package iq

import "encoding/binary"

// murmur2Seed is the seed of Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2).
const murmur2Seed = 0x9747b28c

// murmur2 returns Kafka's 32-bit murmur2 hash of data, bit for bit the value
// of Java's org.apache.kafka.common.utils.Utils.murmur2, of a byte slice or
// of a string's UTF-8 bytes alike. It does not allocate.
func murmur2[T []byte | string](data T) int32 {
	const (
		m = 0x5bd1e995
		r = 24
	)
	n := len(data)
	h := uint32(murmur2Seed) ^ uint32(n)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	// The tail falls through like Java's switch on length % 4.
	switch n - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// toPositive is Kafka's Utils.toPositive: it clears the sign bit. It is not
// Abs: toPositive(-1) is 2147483647, and MinInt32 maps to 0.
func toPositive(h int32) int32 { return h & 0x7fffffff }

// Partition returns the partition Kafka assigns to a serialized key among
// numPartitions partitions: toPositive(murmur2(key)) % numPartitions, as
// Java's BuiltInPartitioner.partitionForKey and Kafka Streams' default
// partitioner do. It panics if numPartitions <= 0. It does not allocate.
func Partition(key []byte, numPartitions int) int {
	return int(toPositive(murmur2(key))) % numPartitions
}

// PartitionString is Partition of the UTF-8 bytes of key (what Java's
// StringSerializer produces), without allocating.
func PartitionString(key string, numPartitions int) int {
	return int(toPositive(murmur2(key))) % numPartitions
}

// Partitioner maps a serialized key to a partition of topic, which has
// numPartitions partitions. It is the Go side of a Kafka Streams
// StreamPartitioner: an application whose Java code uses a custom
// StreamPartitioner for a store's source topic supplies the same logic here.
// The result must be in [0, numPartitions). Implementations must be safe for
// concurrent use.
type Partitioner interface {
	Partition(topic string, key []byte, numPartitions int) int
}

// PartitionerFunc adapts a function to Partitioner.
type PartitionerFunc func(topic string, key []byte, numPartitions int) int

// Partition calls f.
func (f PartitionerFunc) Partition(topic string, key []byte, numPartitions int) int {
	return f(topic, key, numPartitions)
}

// Key serializers: iq routes serialized keys, so a key must be encoded the
// way the Java application's key serde encodes it. These append the encoding
// of Kafka's built-in serializers to dst and return the extended slice; a
// caller that reuses dst routes without allocating.

// AppendStringKey appends key as Java's StringSerializer encodes it (UTF-8).
func AppendStringKey(dst []byte, key string) []byte { return append(dst, key...) }

// AppendInt32Key appends key as Java's IntegerSerializer encodes it (4 bytes,
// big-endian).
func AppendInt32Key(dst []byte, key int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(key))
}

// AppendInt64Key appends key as Java's LongSerializer encodes it (8 bytes,
// big-endian).
func AppendInt64Key(dst []byte, key int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(key))
}
