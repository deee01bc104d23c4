# bench/lib.sh: what bench/'s scripts share, sourced from the repository's root with $tmp set
# to a scratch directory: where the processes run, the mock upstream and memproxy's port on
# loopback.

# bench_cpus WORKERS: where memproxy and the load run. With more CPUs than memproxy has
# workers (and PIN not 0), memproxy gets the first WORKERS CPUs (its writer shares them) and
# the mock upstream and the benchmark client the others: sets pin_mp and pin_load to taskset
# commands to prefix, and pin_note to a line for the report. Otherwise both are empty and the
# scheduler mixes everything on every CPU.
#
# Why: DESIGN's throughput target is per core, and in production memproxy does not share its
# cores with the model and the voice platform. Mixed on two CPUs, the client and the mock
# preempted memproxy's worker 0.34-0.65 times per request (its involuntary context switches,
# 0.25 pinned: the writer's) and memproxy spent ~10% more CPU per request (bench/README).
bench_cpus() {
    local n w=$1 mine load
    n=$(nproc)
    pin_mp=()
    pin_load=()
    pin_note="not pinned: memproxy, the mock upstream and the client share all $n CPU(s)"
    if [ "${PIN:-1}" != 0 ] && [ "$n" -gt "$w" ] && command -v taskset >/dev/null; then
        mine=$(bench_range 0 $((w - 1)))
        load=$(bench_range "$w" $((n - 1)))
        pin_mp=(taskset -c "$mine")
        pin_load=(taskset -c "$load")
        pin_note="memproxy on CPU $mine, the mock upstream and the client on CPU $load"
    fi
}

# bench_pin_pg DIR: the PostgreSQL server of tests/pgcluster.py's folder DIR onto the load's
# CPUs (once bench_cpus ran): its postmaster, whose backends inherit where it runs, and the
# processes it started already. Why: as the model and the voice platform, in production the
# database does not share memproxy's cores; left unpinned, its backends also woke on memproxy's
# CPU, and memproxy's transactions took longer (bench/README).
bench_pin_pg() {
    local pm child
    [ ${#pin_load[@]} -gt 0 ] || return 0
    pm=$(head -1 "$1/data/postmaster.pid")
    for child in "$pm" $(pgrep -P "$pm"); do
        taskset -apc "${pin_load[2]}" "$child" >/dev/null
    done
}

# bench_range FIRST LAST: a CPU list for taskset ("1", "2-3")
bench_range() { [ "$1" = "$2" ] && echo "$1" || echo "$1-$2"; }

# bench_mock: start the mock upstream (no delay; on the load's CPUs once bench_cpus ran); sets
# mock_pid and mock_port, and writes $tmp/memproxy.yaml, a config whose only upstream is the
# mock (log level warn).
bench_mock() {
    ${pin_load[@]+"${pin_load[@]}"} ./build-bench/tests/mock_upstream \
        --port-file "$tmp/mock.port" >/dev/null 2>&1 &
    mock_pid=$!
    for _ in $(seq 100); do [ -s "$tmp/mock.port" ] && break; sleep 0.05; done
    mock_port=$(cat "$tmp/mock.port")
    printf 'log:\n  level: warn\nupstreams: [{name: mock, url: "http://127.0.0.1:%s/v1"}]\n' \
        "$mock_port" >"$tmp/memproxy.yaml"
}

# bench_paced on|off: the mock's reply for the voice pattern (20 tokens 3 ms apart, as a model
# speaks), or its default (bench_mock must have run).
bench_paced() {
    local body='{"reply": "Hello! This is the memproxy mock upstream, streaming one token at a time.", "token_delay_ms": 0}'
    [ "$1" = on ] && body="{\"reply\": \"$(seq -f 'word%g' 20 | xargs)\", \"token_delay_ms\": 3}"
    curl -sf -X POST "http://127.0.0.1:$mock_port/_mock/config" -d "$body" >/dev/null
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

# bench_free_port: a free TCP port on loopback
bench_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# bench_nginx_conf DIR MOCK_PORT PORT: the nginx bench/ compares memproxy with, in DIR/nginx.conf
# (its temporary folders and log in DIR): one process, no logs on the request path, kept-alive
# connections both ways (nginx closes a client's connection after 1,000 requests by default,
# and mpbench counts on one), proxy_pass to the mock on MOCK_PORT, listening on PORT.
bench_nginx_conf() {
    local d=$1
    mkdir -p "$d"
    cat >"$d/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    client_body_temp_path $d/body;
    proxy_temp_path $d/proxy;
    fastcgi_temp_path $d/fastcgi;
    uwsgi_temp_path $d/uwsgi;
    scgi_temp_path $d/scgi;
    client_body_buffer_size 64k;
    client_max_body_size 1m;
    upstream mock {
        server 127.0.0.1:$2;
        keepalive 64;
        keepalive_requests 100000000;
    }
    server {
        listen 127.0.0.1:$3;
        location / {
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
}
