// Package bench is probegate's benchmark: it starts simulated vLLM fleets
// (bench/vllmsim) and real probegate proxies on loopback, replays seeded
// open-loop streaming workloads through them for each routing strategy,
// and writes results.json (DESIGN.md's schema), report.md and SVG plots.
//
// One file per concern: schedule.go (Poisson/gamma arrivals), workload.go
// (the seeded request sequence), sse.go and loadgen.go (the streaming
// client and the open- and closed-loop generators), strategies.go (the
// proxy configuration of each strategy, the oracle, metric reading),
// run.go (one run on a fresh fleet; capacity), scenarios.go (scenario
// definitions and the runner), results.go, report.go, plot.go, overhead.go
// (nginx, HAProxy, wrk, RSS) and progress.go. The command is
// bench/cmd/bench; bench/README.md explains the method and the results.
package bench
