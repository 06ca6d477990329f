#!/usr/bin/env bash
# tests/tls_scan.sh [BIN] — testssl.sh against the broker's TLS listener
# (issue 15). Makes fresh certificates (tests/e2e/tls_certs.sh), starts a
# jrpc-broker with --tls-cert/--tls-key on 127.0.0.1, runs testssl (protocols,
# cipher categories, forward secrecy, every cipher per protocol, server
# defaults, vulnerabilities) with a flat JSON report, stops the broker and
# judges the report:
#
#   - a weak protocol offered: SSLv2, SSLv3, TLS 1.0, TLS 1.1;
#   - a weak cipher category offered: NULL, aNULL, EXPORT, LOW, 3DES/IDEA,
#     obsoleted (CBC); a TLS 1.2 cipher accepted that is not ECDHE (forward
#     secrecy) with an AEAD (GCM, ChaCha20-Poly1305, CCM);
#   - a finding that says VULNERABLE or NOT ok, or is rated HIGH or
#     CRITICAL, except the ones a throwaway test CA earns by design (the
#     chain is not in testssl's trust stores; listed in $ALLOWED below);
#   - a protocol, cipher category or vulnerability check missing from the
#     report or marked WARN (not tested: the scan would prove nothing);
#
# any of them fails the scan (exit 1, one line each). Prints every finding
# rated LOW or above, the ciphers accepted, and the time taken. BIN is the folder of jrpc-broker
# (default: $JRPC_BIN). docs/TLS.md, "Scan (testssl.sh)", has a run's summary.
#
#   bash tests/tls_scan.sh build/bin
#   JRPC_TLS_SCAN_KEEP=dir bash tests/tls_scan.sh build/bin    (keeps the JSON report in dir)
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export JRPC_BIN=${1:-${JRPC_BIN:-}}
[ -n "$JRPC_BIN" ] || { echo "usage: tests/tls_scan.sh BIN (the folder of jrpc-broker)"; exit 2; }
[ -x "$JRPC_BIN/jrpc-broker" ] || { echo "tls_scan: no $JRPC_BIN/jrpc-broker"; exit 2; }
JRPC_E2E_LIB=${JRPC_E2E_LIB:-$HERE/e2e/lib.sh}
TESTSSL=$(command -v testssl || command -v testssl.sh) ||
    { echo "tls_scan: testssl.sh is needed (Debian package testssl.sh: bash deploy/deps.sh)"; exit 1; }
source "$JRPC_E2E_LIB"
E2E_HTTP=1

# Rated HIGH/CRITICAL only because the certificates are made up for the run
# (tls_certs.sh): a CA no trust store has, 30 days of validity (testssl
# rates "expires < 30 days" HIGH; an expired one still fails), no CRL or
# OCSP URI. engine_problem is about the local openssl (no GOST engine).
ALLOWED='^(cert_chain_of_trust|cert_notAfter|cert_revocation|engine_problem)$'

C=$E2E_TMP/certs
bash "$HERE/e2e/tls_certs.sh" "$C" || { echo "tls_scan: certificates not made"; exit 1; }
start=$(date +%s)
E2E_LOG_LEVEL=debug e2e_start_broker --tls-cert "$C/chain.pem" --tls-key "$C/server.key"
json=$E2E_TMP/scan.json
# --warnings off: no prompts; --openssl-timeout bounds every probe.
timeout 600 "$TESTSSL" --quiet --color 0 --warnings off --openssl-timeout 10 \
    --protocols --std --fs --cipher-per-proto --server-defaults --vulnerable \
    --jsonfile "$json" "127.0.0.1:$HTTP_PORT" >"$E2E_TMP/testssl.out" 2>&1
rc=$?
alive=$(kill -0 "$BROKER_PID" 2>/dev/null && echo yes || echo no)
kill "$BROKER_PID" 2>/dev/null
wait "$BROKER_PID" 2>/dev/null
secs=$(( $(date +%s) - start ))
[ -n "${JRPC_TLS_SCAN_KEEP:-}" ] && cp "$json" "$E2E_TMP"/*.out "$E2E_TMP"/*.log "$JRPC_TLS_SCAN_KEEP/"
if [ ! -s "$json" ]; then
    tail -n 30 "$E2E_TMP/testssl.out"
    echo "tls_scan: testssl wrote no report (exit $rc)"
    exit 1
fi

ALLOWED=$ALLOWED python3 - "$json" "$alive" <<'EOF'
import json, os, re, sys
findings = json.load(open(sys.argv[1]))
allowed = re.compile(os.environ["ALLOWED"])
by_id = {}
for f in findings:
    by_id.setdefault(f.get("id", ""), []).append(f)
bad = []
weak_protocols = ["SSLv2", "SSLv3", "TLS1", "TLS1_1"]
# testssl 3.0 names the obsoleted CBC category AVERAGE, 3.1 OBSOLETED
weak_ciphers = ["cipherlist_NULL", "cipherlist_aNULL", "cipherlist_EXPORT", "cipherlist_LOW",
                "cipherlist_3DES_IDEA", "cipherlist_AVERAGE", "cipherlist_OBSOLETED",
                "cipherlist_STRONG_NOFS"]
vulns = ["heartbleed", "CCS", "ticketbleed", "ROBOT", "secure_renego", "secure_client_renego",
         "CRIME_TLS", "BREACH", "POODLE_SSL", "fallback_SCSV", "SWEET32", "FREAK", "DROWN",
         "LOGJAM", "BEAST", "LUCKY13", "RC4"]
# what must be in the report, tested (not WARN): else the scan proves nothing
for i in weak_protocols + weak_ciphers[:5] + vulns + ["TLS1_2", "TLS1_3"]:
    if i not in by_id:
        bad.append("%s: not in the report (not run)" % i)
    elif any(f.get("severity") == "WARN" for f in by_id[i]):
        bad.append("%s: testssl could not test it: %s" % (i, by_id[i][0].get("finding")))
if "cipherlist_AVERAGE" not in by_id and "cipherlist_OBSOLETED" not in by_id:
    bad.append("the CBC category is not in the report (not run)")
# every cipher the server accepts (--cipher-per-proto): TLS 1.2 ones must be
# ECDHE (forward secrecy) with an AEAD (GCM, ChaCha20-Poly1305, CCM)
ciphers = []
for f in findings:
    m = re.match(r"cipher-(tls1(?:_[0-9])?|ssl[23])_x", f.get("id", ""))
    if not m:
        continue
    # "TLS 1.2   xc02b   ECDHE-ECDSA-AES128-GCM-SHA256   ECDH 253   AESGCM   128   TLS_..."
    c = re.match(r"(.*?)\s+x[0-9a-f]+\s+(\S+)\s+(\S+)\s+(?:\d+\s+)?(\S+)", f.get("finding", ""))
    if not c:
        bad.append("cipher line not understood: %s" % f.get("finding"))
        continue
    ciphers.append("%s %s (kx %s, %s)" % (c.group(1), c.group(2), c.group(3), c.group(4)))
    if m.group(1) == "tls1_3":
        continue
    if m.group(1) != "tls1_2":
        bad.append("cipher offered below TLS 1.2: %s" % f["finding"])
    elif c.group(3) != "ECDH" or not re.match(r"(AESGCM|ChaCha20|AESCCM)", c.group(4)):
        bad.append("weak TLS 1.2 cipher (not ECDHE with an AEAD): %s" % f["finding"])
if not ciphers:
    bad.append("no cipher listed (--cipher-per-proto did not run)")
for f in findings:
    i, sev, text = f.get("id", ""), f.get("severity", ""), f.get("finding", "")
    if sev in ("LOW", "MEDIUM", "HIGH", "CRITICAL", "WARN", "FATAL"):
        print("  %-8s %-28s %s" % (sev, i, text))
    if i in weak_protocols and not text.startswith("not offered"):
        bad.append("weak protocol %s: %s" % (i, text))
    elif i in weak_ciphers and not text.startswith("not offered"):
        bad.append("weak ciphers %s: %s" % (i, text))
    elif allowed.match(i) or sev == "WARN":
        continue
    elif i == "cert_expirationStatus" and "expires < " in text:
        continue
    elif re.search(r"VULNERABLE|NOT ok", text) or sev in ("HIGH", "CRITICAL", "FATAL"):
        bad.append("%s (%s): %s" % (i, sev, text))
if sys.argv[2] != "yes":
    bad.append("the broker died during the scan")
for i in ("TLS1_2", "TLS1_3", "PFS_ECDHE_curves", "ALPN", "sessionresumption_ticket"):
    for f in by_id.get(i, []):
        print("  %-8s %-28s %s" % ("", i, f.get("finding", "")))
for c in ciphers:
    print("  %-8s %-28s %s" % ("", "cipher", c))
vul_ok = sum(1 for i in vulns if i in by_id and all(f.get("severity") in ("OK", "INFO", "LOW")
                                                    for f in by_id[i]))
print("tls_scan: %d findings, %d/%d vulnerability checks OK, %d ciphers accepted, %s" %
      (len(findings), vul_ok, len(vulns), len(ciphers),
       "%d weak" % len(bad) if bad else "nothing weak"))
for b in bad:
    print("WEAK " + b)
sys.exit(1 if bad else 0)
EOF
verdict=$?
echo "tls_scan: testssl $(dpkg-query -W -f='${Version}' testssl.sh 2>/dev/null || echo '?'), $(openssl version | cut -d' ' -f1-2), broker up $secs s"
exit $verdict
