//go:build race

package test

// raceEnabled: the tests that drive nacos-sdk-go in this process run in the
// README's non-race step instead (see nacosAddr).
const raceEnabled = true
