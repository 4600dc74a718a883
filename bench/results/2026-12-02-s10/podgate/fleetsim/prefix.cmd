/tmp/podgate/ttftwhy -workload prefix -pods 8 -slowdown 1 -rate 48.6 -duration 20s -seeds 10 -replicas 1,8 -pod-history 3 -strategies probe,probe_podgate8,probe_podseed8
