# Joins (starting it if needed) the cluster shared by one nextest run.
# Run by router/tests/support/pg.rs (sh -c).
set -u
while :; do
    mkdir -p "$B" || { echo "error: cannot create $B"; exit 1; }
    chmod 755 "$B" 2>/dev/null
    exec 9>>"$B/start.lock" || { echo "error: cannot open $B/start.lock"; exit 1; }
    flock -x 9
    # The supervisor may have removed the dir while we waited: retry.
    if [ -e "$B/start.lock" ] && [ "$(stat -L -c %d:%i /proc/self/fd/9)" = "$(stat -c %d:%i "$B/start.lock")" ]; then
        break
    fi
    exec 9>&-
done
if [ "$(cat "$B/state" 2>/dev/null)" = ready ]; then
    PORT=$(cat "$B/port")
    if ! "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 10 9>&-; then
        echo "error: the shared test cluster in $B (port $PORT) does not answer"
        exit 1
    fi
else
    rm -rf "$B/cluster"
    mkdir "$B/cluster" || { echo "error: cannot create $B/cluster"; exit 1; }
    if [ -n "$CHOWN" ]; then chown "$CHOWN" "$B/cluster"; fi
    if ! $RUNAS "$PGBIN/initdb" -D "$B/cluster/data" -A trust -U postgres -E UTF8             --no-locale --no-sync </dev/null >"$B/initdb.log" 2>&1 9>&-; then
        echo "error: initdb failed:"; cat "$B/initdb.log"; rm -rf "$B/cluster"; exit 1
    fi
    # TLS on where openssl exists (tls_cert.sh); the CA stays in $B/cluster/ca.crt.
    TLSOPTS=$(sh -c "$TLS_CERT" tls_cert "$B/cluster" "${CHOWN%%:*}" 9>&-) || { TLSOPTS=; rm -f "$B/cluster/ca.crt"; }
    if ! $RUNAS "$PGBIN/pg_ctl" -D "$B/cluster/data" -l "$B/cluster/server.log" -w -t 60             -o "-p $PORT -k $B/cluster -c listen_addresses=127.0.0.1 $PGOPTS $TLSOPTS" start             </dev/null >/dev/null 2>&1 9>&-; then
        echo "error: pg_ctl start failed; server log:"; cat "$B/cluster/server.log"
        $RUNAS "$PGBIN/pg_ctl" -D "$B/cluster/data" -m immediate -w stop </dev/null >/dev/null 2>&1 9>&-
        rm -rf "$B/cluster"; exit 1
    fi
    echo "$PORT" > "$B/port"
    echo ready > "$B/state"
    setsid sh -c "$RUN_SUPERVISOR" </dev/null >/dev/null 2>&1 9>&- &
fi
exec 7>>"$B/users.lock"
flock -s 7
exec 9>&-
echo "ready $(cat "$B/port")"
exec cat >/dev/null
