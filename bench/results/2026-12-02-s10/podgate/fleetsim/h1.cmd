/tmp/podgate/ttftwhy -trace /work/shared/traces/azure_code_2023.csv -rate 8.1 -duration 20s -warmup 0s -seeds 30 -replicas 1,8 -pod-history 1 -strategies probe,probe_podgate8,probe_podseed8
