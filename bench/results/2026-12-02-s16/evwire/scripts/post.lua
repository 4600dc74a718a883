wrk.method = "POST"
wrk.body = '{"model":"m","prompt":"hello","max_tokens":1}'
wrk.headers["Content-Type"] = "application/json"
