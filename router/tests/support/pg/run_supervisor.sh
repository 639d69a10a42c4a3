# Stops a run-shared cluster once it has had no user for $IDLE seconds.
# Run by router/tests/support/pg.rs (sh -c).
idle=0
while :; do
    sleep 1
    exec 9>>"$B/start.lock"
    flock -x 9
    if flock -n -x "$B/users.lock" true 9>&-; then idle=$((idle + 1)); else idle=0; fi
    if [ "$idle" -ge "$IDLE" ]; then
        echo stopping > "$B/state"
        $RUNAS "$PGBIN/pg_ctl" -D "$B/cluster/data" -m immediate -w stop </dev/null >/dev/null 2>&1 9>&-
        rm -rf "$B"
        exit 0
    fi
    exec 9>&-
done
