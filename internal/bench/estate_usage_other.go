//go:build !linux

package bench

import "time"

// Elsewhere the estate reports no CPU and no peak RSS (0).
func selfCPU() time.Duration { return 0 }
func resetPeakRSS() bool     { return false }
func peakRSS() int64         { return 0 }
