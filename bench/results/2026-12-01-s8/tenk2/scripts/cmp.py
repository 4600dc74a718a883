import json,sys
a,b=sys.argv[1],sys.argv[2]
ja,jb=json.load(open(a+"/results.json")),json.load(open(b+"/results.json"))
for sa,sb in zip(ja["scenarios"],jb["scenarios"]):
    for ta,tb in zip(sa["strategies"],sb["strategies"]):
        print(f'{sa["name"]:16s} {ta["name"]:8s} p99 pooled {ta["ttft_ms"]["p99"]:8.0f} -> {tb["ttft_ms"]["p99"]:8.0f} ({tb["ttft_ms"]["p99"]/ta["ttft_ms"]["p99"]:.2f}x)  by seed {ta["ttft_p99_by_seed"]} -> {tb["ttft_p99_by_seed"]}  probes/req {ta["probes_per_request"]} -> {tb["probes_per_request"]}  p50 {ta["ttft_ms"]["p50"]:.0f} -> {tb["ttft_ms"]["p50"]:.0f} err {ta["errors"]}/{tb["errors"]}')
