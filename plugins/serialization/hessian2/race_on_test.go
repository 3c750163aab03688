//go:build race

package hessian2

// raceEnabled: under the race detector the runtime's allocations are not
// what a program makes (its instrumentation allocates beside them), so the
// tests that weigh the decode budget against the heap run in test.sh's
// step without -race instead.
const raceEnabled = true
