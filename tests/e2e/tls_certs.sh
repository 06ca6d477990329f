#!/usr/bin/env bash
# tests/e2e/tls_certs.sh DIR — makes the certificates the TLS tests use, fresh
# each run (nothing that expires is kept in the tree), with the openssl CLI:
#
#   ca.pem ca.key             a test CA
#   server.pem server.key     127.0.0.1 / ::1 / localhost, signed by the CA
#   server2.pem server2.key   another one for the same names (reload tests)
#   chain.pem                 server.pem followed by ca.pem (a chain file)
#   client.pem client.key     a client certificate, CN=alice (mutual TLS)
#   client-bob.pem/.key       CN=bob, same CA
#   rogue-ca.pem/.key         another CA, and rogue.pem/.key (CN=alice) signed by it
#
# EC P-256 keys (fast to make). Exits non-zero on any failure.
set -eu
dir=${1:?usage: tls_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
o() { openssl "$@" 2>/dev/null; }
days=30
mkkey() { o genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
ca() { # ca NAME CN
    mkkey "$1.key"
    o req -x509 -new -key "$1.key" -subj "/CN=$2" -days $days -out "$1.pem" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
leaf() { # leaf NAME CN CA EXT...
    local name=$1 cn=$2 ca=$3; shift 3
    mkkey "$name.key"
    o req -new -key "$name.key" -subj "/CN=$cn" -out "$name.csr"
    printf '%s\n' "$@" >"$name.ext"
    o x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial -days $days \
        -extfile "$name.ext" -out "$name.pem"
    rm -f "$name.csr" "$name.ext"
}
srv=("subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost" "extendedKeyUsage=serverAuth"
     "basicConstraints=CA:FALSE")
cli=("extendedKeyUsage=clientAuth" "basicConstraints=CA:FALSE")
ca ca "jrpc test CA"
leaf server localhost ca "${srv[@]}"
leaf server2 localhost ca "${srv[@]}"
cat server.pem ca.pem >chain.pem
leaf client alice ca "${cli[@]}"
leaf client-bob bob ca "${cli[@]}"
ca rogue-ca "rogue CA"
leaf rogue alice rogue-ca "${cli[@]}"
chmod 600 ./*.key
