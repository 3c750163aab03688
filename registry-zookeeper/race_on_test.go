//go:build race

package zookeeper

const raceEnabled = true
