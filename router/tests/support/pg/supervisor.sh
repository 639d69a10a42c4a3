# Starts one process's throwaway cluster, prints `ready`, waits for EOF on
# stdin (the test process closing the pipe), then stops the server and
# removes its directory. Run by router/tests/support/pg.rs (sh -c).
PGDATA="$DIR/data"
# TLS on where openssl exists (tls_cert.sh); the CA stays in $DIR/ca.crt.
TLSOPTS=$(sh -c "$TLS_CERT" tls_cert "$DIR" "$OWNER") || { TLSOPTS=; rm -f "$DIR/ca.crt"; }
$RUNAS "$PGBIN/pg_ctl" -D "$PGDATA" -l "$DIR/server.log" -w -t 60 \
    -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 $PGOPTS $TLSOPTS" start </dev/null >/dev/null 2>&1
rc=$?
if [ $rc -eq 0 ]; then
    echo ready
    # Blocks until the test process closes the pipe (exit, panic or kill).
    while read -r _line; do :; done
else
    echo "pg_ctl start failed ($rc); server log:"
    cat "$DIR/server.log" 2>/dev/null
fi
$RUNAS "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate -w stop </dev/null >/dev/null 2>&1
rm -rf "$DIR"
