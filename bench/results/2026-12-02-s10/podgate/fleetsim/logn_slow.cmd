/tmp/podgate/ttftwhy -workload lognormal -pods 8 -slowdown 2 -rate 18 -duration 20s -seeds 30 -replicas 1,8 -pod-history 3 -strategies probe,probe_podgate8,probe_podseed8
