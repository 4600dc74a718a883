//go:build race

package logsink

// raceEnabled: the race detector makes sync.Pool drop a share of what is
// put back, so allocation counts are not meaningful under it.
const raceEnabled = true
