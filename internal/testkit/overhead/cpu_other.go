//go:build !unix

package overhead

import "time"

// cpuTime is 0 where the process's CPU time is not read: cpu-ns/msg is
// then not reported.
func cpuTime() time.Duration { return 0 }
