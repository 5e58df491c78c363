package iq

import (
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"
)

// Values published for Java's Utils.murmur2 and BuiltInPartitioner.
func TestMurmur2KnownValues(t *testing.T) {
	tests := []struct {
		key        string
		murmur2    int32
		part3      int
		part8      int
		fromJavaOf string
	}{
		{"KH01", 134561646, 0, 6, "Utils.murmur2"},
		{"KH07", -1895882538, 2, 6, "Utils.murmur2"},
		{"KH32", 1810218049, 1, 1, "Utils.murmur2"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := murmur2([]byte(tt.key)); got != tt.murmur2 {
				t.Errorf("murmur2(%q) = %d, want %d", tt.key, got, tt.murmur2)
			}
			if got := Partition([]byte(tt.key), 3); got != tt.part3 {
				t.Errorf("Partition(%q, 3) = %d, want %d", tt.key, got, tt.part3)
			}
			if got := Partition([]byte(tt.key), 8); got != tt.part8 {
				t.Errorf("PartitionString(%q, 8) = %d, want %d", tt.key, got, tt.part8)
			}
		})
	}
}

func TestToPositiveIsNotAbs(t *testing.T) {
	tests := []struct{ in, want int32 }{
		{-1, 2147483647},
		{-2147483648, 0},
		{-1895882538, 251601110},
		{7, 7},
	}
	for _, tt := range tests {
		if got := toPositive(tt.in); got != tt.want {
			t.Errorf("toPositive(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestGrowingThreeToSixMovesSixteenOfThirtyTwo(t *testing.T) {
	moved := 0
	for i := 1; i <= 32; i++ {
		k := fmt.Sprintf("KH%02d", i)
		if Partition([]byte(k), 3) != Partition([]byte(k), 6) {
			moved++
		}
	}
	if moved != 16 {
		t.Fatalf("3 -> 6 partitions moved %d of KH01..KH32, want 16", moved)
	}
}

// kafka-go's Murmur2Balancer is an independent implementation of the same
// Java algorithm; every key length 0..40 exercises all tail cases.
func TestPartitionMatchesKafkaGoMurmur2Balancer(t *testing.T) {
	b := kafka.Murmur2Balancer{Consistent: true}
	for _, n := range []int{1, 2, 3, 6, 7, 8, 64, 1000} {
		parts := make([]int, n)
		for i := range parts {
			parts[i] = i
		}
		for l := 0; l <= 40; l++ {
			for seed := 0; seed < 25; seed++ {
				key := make([]byte, l)
				for i := range key {
					key[i] = byte(seed*131 + i*7 + l*251)
				}
				want := b.Balance(kafka.Message{Key: key}, parts...)
				if got := Partition(key, n); got != want {
					t.Fatalf("Partition(%x, %d) = %d, kafka-go says %d", key, n, got, want)
				}
			}
		}
	}
}

func TestPartitionDoesNotAllocate(t *testing.T) {
	key := []byte("customer-000042")
	if a := testing.AllocsPerRun(100, func() { _ = Partition(key, 64) }); a != 0 {
		t.Errorf("Partition allocates %.1f times", a)
	}
}

var sinkInt int

// BenchmarkPartition compares iq's partitioner with kafka-go's
// Murmur2Balancer{Consistent: true} on the same 15-byte key and 64 partitions.
func BenchmarkPartition(b *testing.B) {
	key := []byte("customer-000042")
	parts := make([]int, 64)
	for i := range parts {
		parts[i] = i
	}
	b.Run("iq.Partition", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkInt += Partition(key, 64)
		}
	})
	b.Run("kafka-go.Murmur2Balancer", func(b *testing.B) {
		bal := kafka.Murmur2Balancer{Consistent: true}
		msg := kafka.Message{Key: key}
		b.ReportAllocs()
		for b.Loop() {
			sinkInt += bal.Balance(msg, parts...)
		}
	})
}
