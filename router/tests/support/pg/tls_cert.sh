# Writes a throwaway CA ($1/ca.crt) and a server certificate and key for
# the name "localhost" only, not 127.0.0.1 ($1/server.crt, $1/server.key:
# owned by $2 when given, the key mode 0600, as PostgreSQL requires), and
# prints the server options that turn TLS on with them. Prints nothing and
# fails when openssl is missing. P-256 keys: quick to make.
# Used by router/tests/support/pg.rs (sh -c, DIR and OWNER in $1 and $2)
# and by ci/pg-suite.sh.
d=$1
owner=${2:-}
command -v openssl >/dev/null 2>&1 || exit 1
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $ec -days 2 -subj "/CN=router test CA" \
    -keyout "$d/ca.key" -out "$d/ca.crt" >/dev/null 2>&1 || exit 1
openssl req $ec -subj "/CN=localhost" \
    -keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1 || exit 1
printf 'subjectAltName=DNS:localhost\n' > "$d/server.ext"
openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -extfile "$d/server.ext" -out "$d/server.crt" >/dev/null 2>&1 || exit 1
if [ -n "$owner" ]; then chown "$owner" "$d/server.key" "$d/server.crt" || exit 1; fi
chmod 600 "$d/server.key"
chmod 644 "$d/ca.crt"
echo "-c ssl=on -c ssl_cert_file=$d/server.crt -c ssl_key_file=$d/server.key"
