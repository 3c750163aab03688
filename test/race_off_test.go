//go:build !race

package test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
