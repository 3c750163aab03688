//go:build !unix

package main

import "time"

// processCPU is not measured where getrusage is missing: weft bench reports 0.
func processCPU() time.Duration { return 0 }
