//go:build !race

package wasmfilter_test

const raceEnabled = false
