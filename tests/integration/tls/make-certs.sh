#!/usr/bin/env bash
# Throw-away certificates for the TLS tests (tests/integration/tls_test.cc, tls_test.py), made
# with Debian's openssl into DIR at test time; nothing secret is kept in the repository.
#   ca.pem ca.key              the test CA
#   server.pem server.key      CN=localhost, SAN DNS:localhost and IP:127.0.0.1, from the CA
#   client.pem client.key      CN=alice, a client certificate from the CA (mutual TLS)
#   other-ca.pem other-ca.key  a second CA that signed nothing the broker uses
#   other-server.pem/.key      CN=localhost like server.pem, from the other CA (reload tests)
#   expired.pem expired.key    like server.pem, valid only in January 2020
#
#   tests/integration/tls/make-certs.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "make-certs.sh: failed: $*" >&2; "$@"; exit 1; }; }

ca() {  # ca NAME SUBJECT
  quiet openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.pem" -days 30 \
    -subj "$2" -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign
}
leaf() {  # leaf NAME SUBJECT CA EXTENSIONS
  quiet openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
  printf '%s\n' "$4" >"$1.ext"
  quiet openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial \
    -out "$1.pem" -days 30 -extfile "$1.ext"
}
server_ext='subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth'
ca ca "/CN=Wharf Test CA"
ca other-ca "/CN=Wharf Other Test CA"
leaf server "/CN=localhost" ca "$server_ext"
leaf other-server "/CN=localhost" other-ca "$server_ext"
leaf client "/CN=alice/O=Wharf Tests" ca 'extendedKeyUsage=clientAuth'

# Expired: openssl ca sets any validity period (x509 -req cannot start in the past).
mkdir -p ca-db
: >ca-db/index.txt
echo 1000 >ca-db/serial
cat >ca-db/ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = ca-db/index.txt
new_certs_dir = ca-db
serial = ca-db/serial
default_md = sha256
policy = any
copy_extensions = copy
[any]
commonName = supplied
CNF
quiet openssl req -newkey rsa:2048 -nodes -keyout expired.key -out expired.csr -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1"
quiet openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
  -out expired.pem -startdate 20200101000000Z -enddate 20200131000000Z -notext
chmod 600 ./*.key
