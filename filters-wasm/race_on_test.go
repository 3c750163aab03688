//go:build race

package wasmfilter_test

// raceEnabled: the race detector's instrumentation allocates, so allocation
// counts are not checked under it.
const raceEnabled = true
