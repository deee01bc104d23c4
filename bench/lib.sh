# bench/lib.sh: what bench/'s scripts share, sourced from the repository's root with $tmp set
# to a scratch directory: the mock upstream and memproxy's port on loopback.

# bench_mock: start the mock upstream (no delay); sets mock_pid and mock_port, and writes
# $tmp/memproxy.yaml, a config whose only upstream is the mock (log level warn).
bench_mock() {
    ./build-bench/tests/mock_upstream --port-file "$tmp/mock.port" >/dev/null 2>&1 &
    mock_pid=$!
    for _ in $(seq 100); do [ -s "$tmp/mock.port" ] && break; sleep 0.05; done
    mock_port=$(cat "$tmp/mock.port")
    printf 'log:\n  level: warn\nupstreams: [{name: mock, url: "http://127.0.0.1:%s/v1"}]\n' \
        "$mock_port" >"$tmp/memproxy.yaml"
}

# bench_port PID LOG: print the port memproxy PID listens on, read from the socket table (its
# log names it at level info only); after 10 s without one, print LOG and fail.
bench_port() {
    local port=
    for _ in $(seq 200); do
        port=$(ss -ltnpH 2>/dev/null |
            awk -v p="pid=$1," '$0 ~ p {split($4, a, ":"); print a[length(a)]; exit}')
        [ -n "$port" ] && { echo "$port"; return 0; }
        sleep 0.05
    done
    echo "memproxy (pid $1) did not start:" >&2
    cat "$2" >&2
    return 1
}
