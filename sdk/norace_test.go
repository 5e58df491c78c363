//go:build !race

package sdk_test

// raceDetector reports whether the tests run with -race.
const raceDetector = false
