# A throwaway PostgreSQL cluster for the CI scripts (sourced, not run:
# ci/pg-suite.sh, ci/small-box.sh --postgres). Debian's server binaries
# (initdb and pg_ctl as the postgres user), a fresh directory under /tmp,
# a free loopback port, a Unix socket in that directory.
#
#   pg_cluster_init PREFIX   finds the binaries ($pgbin), makes the
#                            directory ($pg_dir, owned by postgres), runs
#                            initdb and picks a port ($pg_port); returns 1,
#                            saying why, where there are no server binaries
#   pg_cluster_start OPTS [GROUP_DIR ...]
#                            starts the server with OPTS added to its
#                            options; with GROUP_DIRs (cgroup directories),
#                            the server and every backend it forks run in
#                            those groups
#   pg_cluster_stop          stops it and removes $pg_dir
#
# Needs root (the server runs as the postgres user).

pg_cluster_init() {
  pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ]; then
    echo "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: install Debian's postgresql" >&2
    return 1
  fi
  pg_dir=$(mktemp -d "/tmp/$1.XXXXXX")
  chown postgres "$pg_dir"
  pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  runuser -u postgres -- "$pgbin/initdb" -D "$pg_dir/data" -A trust -U postgres >/dev/null
}

pg_cluster_start() {
  local opts=$1 enter="" g
  shift
  for g in "$@"; do
    enter="$enter echo \$\$ >'$g/cgroup.procs';"
  done
  sh -c "$enter exec runuser -u postgres -- '$pgbin/pg_ctl' -D '$pg_dir/data' -l '$pg_dir/log' -w \
    -o '-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1 $opts' start >/dev/null"
}

pg_cluster_stop() {
  [ -n "${pg_dir:-}" ] || return 0
  runuser -u postgres -- "$pgbin/pg_ctl" -D "$pg_dir/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$pg_dir"
  pg_dir=
}
