//go:build !unix

package route

import "time"

// processCPU is not measured on this platform: it returns 0.
func processCPU() time.Duration { return 0 }

// processUserCPU is not measured on this platform: it returns 0.
func processUserCPU() time.Duration { return 0 }
