//go:build race

package nacos

const raceEnabled = true
