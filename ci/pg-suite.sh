#!/usr/bin/env bash
# Runs the router's store suite and HTTP tests against a real PostgreSQL
# server started here (Debian's postgresql server binaries: initdb + pg_ctl
# as the postgres user, in a throwaway directory, on a free loopback port),
# with ROUTER_TEST_PG pointing at it, so no PostgreSQL test can skip, then
# the routing lab against routerd on it (ci/route-http.sh) and the restart
# drill on SQLite and on it (router/examples/restart_drill.rs), and last
# the outage and failover drills (router/examples/outage_drill.rs,
# failover_drill.rs). The server
# has TLS on with a throwaway CA, and every connection verifies it
# (sslmode=verify-full). Fails when no server binary exists. The cluster is
# stopped and removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
# The cluster: ci/pg-cluster.sh (initdb, a free port, pg_ctl as postgres).
. ci/pg-cluster.sh
pg_cluster_init router-ci-pg || exit 1
trap pg_cluster_stop EXIT
dir=$pg_dir port=$pg_port
# TLS on: a throwaway CA and a server certificate for the name "localhost"
# only (not 127.0.0.1), so verify-full passes by name and fails by address
# (the script the tests' own throwaway clusters use).
tls=$(sh router/tests/support/pg/tls_cert.sh "$dir" postgres) || {
  echo "making the server's TLS certificate failed (is openssl installed?)" >&2; exit 1; }
# (As commands, for the outage drill at the end to stop and start it.)
pg_stop="runuser -u postgres -- '$pgbin/pg_ctl' -D '$dir/data' -m fast -w stop >/dev/null"
pg_start="runuser -u postgres -- '$pgbin/pg_ctl' -D '$dir/data' -l '$dir/log' -w -o '-p $port -k $dir -c listen_addresses=127.0.0.1 $tls' start >/dev/null"
pg_cluster_start "$tls"
echo "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, TLS on (CA $dir/ca.crt)"
# Every test below connects with verify-full: the server's name checked
# against the throwaway CA (host localhost, dialled at 127.0.0.1).
pg_url="postgres://postgres@localhost:$port/postgres?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert=$dir/ca.crt"
ROUTER_TEST_PG="$pg_url" ROUTER_TEST_PG_CA="$dir/ca.crt" \
  cargo nextest run --workspace --release -E 'package(router) & (test(/^store_suite::/) | test(/^http::/) | test(/^lease_restart::/) | test(/^pg_connection::/))'
# (--workspace, as the README's test command: the test binaries it built
# are reused; `-p router` alone resolves other features and rebuilds.)
# The routing lab against routerd on this server, compared with the run in
# process (needs the lab and routerd built: ci/lab-build.sh, as .ci/run does
# before this step).
ROUTE_HTTP_SQLITE=0 ROUTE_HTTP_DEVICES=30 ROUTE_HTTP_HOURS=0.25 ci/route-http.sh "$pg_url"
# The restart drill (decision 0018): routerd killed with SIGKILL while
# every device holds a leased item, then restarted on the same store; it
# fails on a lost acknowledged deposit or a held item not accepted exactly
# once. On SQLite, then on this server.
target/release/examples/restart_drill 200 4 3
target/release/examples/restart_drill 200 4 3 "$pg_url" restart_drill
# The outage drill (decision 0019), last: routerd on this server under
# load, the server stopped for 5 s (OUTAGE_S) and started again; it fails on an
# answer other than an empty lease or a typed 503 while the server is
# down, on a lost acknowledged deposit, or when routerd does not serve
# again within 10 s of the server's start.
target/release/examples/outage_drill 100 4 2 "${OUTAGE_S:-5}" "$pg_url" outage_drill "$pg_stop" "$pg_start"
# The same drill with the network cut instead of the server stopped:
# routerd dials the server through a proxy in the drill, which stops
# forwarding for 8 s (nothing closed, nothing refused, nothing answers).
# It fails as above, and when an answer while cut takes over 6 s: only
# routerd's own bounds on a store call (1 s, and 1 s to connect) end a wait.
target/release/examples/outage_drill 100 4 2 8 "$pg_url" outage_cut --network-cut
# The failover drill (decision 0020): three routerd replicas on this
# server under load, the server stopped for 3 s (FAILOVER_OUTAGE_S) and
# started again; it fails on a double grant, a host over its politeness,
# a lost acknowledged deposit, an untyped refusal, a lease held through
# the outage not accepted exactly once, or replicas that do not lead and
# serve again. (The replicas' tests, the kill and cut drills among them,
# run in the tests step, on the tests' own cluster with TLS on.)
target/release/examples/failover_drill 3 9 "$pg_url" failover_stop stop "${FAILOVER_OUTAGE_S:-3}" "$pg_stop" "$pg_start"
