//go:build !race

package cond

const raceEnabled = false
