//go:build !race

package logsink

const raceEnabled = false
