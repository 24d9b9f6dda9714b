//go:build race

package registry

// raceEnabled: the race detector slows code unevenly, so timing checks
// are skipped under it.
const raceEnabled = true
