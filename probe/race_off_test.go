//go:build !race

package probe

// raceEnabled: the race detector is on (see race_on_test.go).
const raceEnabled = false
