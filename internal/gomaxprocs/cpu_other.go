//go:build !unix

package gomaxprocs

import "time"

// processCPU is not available here: Run adapts nothing.
func processCPU() (time.Duration, bool) { return 0, false }
