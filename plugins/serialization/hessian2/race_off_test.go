//go:build !race

package hessian2

const raceEnabled = false
