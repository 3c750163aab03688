package adaptivelb

import (
	"bytes"
	"math"
	"os"
	"strconv"
)

// readLoadAverage reads the one-minute load average from /proc/loadavg
// (Linux); false elsewhere or when it cannot be read, and the report then
// says -1 as Java's does on a system without one.
func readLoadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	first, _, _ := bytes.Cut(b, []byte{' '})
	v, err := strconv.ParseFloat(string(first), 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

func floatBits(v float64) uint64 { return math.Float64bits(v) }
func bitsFloat(b uint64) float64 { return math.Float64frombits(b) }
