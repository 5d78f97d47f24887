//go:build race

package cond

// raceEnabled: the race detector makes sync.Pool drop items, so regexp allocates its
// matcher again and allocation counts mean nothing.
const raceEnabled = true
