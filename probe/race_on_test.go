//go:build race

package probe

// raceEnabled: the race detector is on; it makes sync.Pool drop a share of
// what is put back, so recycling tests cannot count allocations.
const raceEnabled = true
