package iq

// murmur2Seed is the seed of Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2).
const murmur2Seed = 0x9747b28c

// murmur2 returns Kafka's 32-bit murmur2 hash of data, bit for bit the value
// of Java's org.apache.kafka.common.utils.Utils.murmur2. It does not
// allocate.
func murmur2(data []byte) int32 {
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
// partitioner do. key is the key as the application's key serde writes it:
// []byte(s) for Kafka's StringSerializer (UTF-8),
// binary.BigEndian.AppendUint32(nil, uint32(k)) for IntegerSerializer,
// binary.BigEndian.AppendUint64(nil, uint64(k)) for LongSerializer. It
// panics if numPartitions <= 0. It does not allocate.
func Partition(key []byte, numPartitions int) int {
	return int(toPositive(murmur2(key))) % numPartitions
}
