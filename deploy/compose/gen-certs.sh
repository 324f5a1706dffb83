#!/usr/bin/env bash
# gen-certs.sh [DIR]: makes what compose.yaml mounts, in DIR (secrets/ beside
# this script by default), with openssl:
#
#   ca.crt, ca.key                  the cluster's CA (no container gets ca.key)
#   lockserver-{a,b,c}.{crt,key}    each member's certificate: named
#                                   <id>.lock.internal, the members' pattern
#                                   (--tls-cluster-names), and for clients
#                                   lockserver-<id>, localhost and 127.0.0.1
#   client.crt, client.key          an application's certificate: from the
#                                   same CA, outside the members' pattern, so
#                                   it lets a client in and never a member
#   lockserver.env                  a random cluster secret and client password
#
# A file that exists is kept: delete DIR to start over. Renew a member's
# certificate by deleting its two files and running this again; the member
# reads the new ones when they change.
set -euo pipefail

dir=${1:-"$(cd "$(dirname "$0")" && pwd)/secrets"}
umask 077
mkdir -p "$dir"
cd "$dir"

ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)

# quietly COMMAND...: runs it, and shows what it printed only if it fails.
quietly() {
	local out
	out=$("$@" 2>&1) || {
		printf '%s\n' "$out" >&2
		return 1
	}
}

if [ ! -e ca.crt ]; then
	quietly openssl req -x509 "${ec[@]}" -days 3650 -subj "/CN=lockserver compose CA" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
		-keyout ca.key -out ca.crt
fi

# cert NAME CN EXTENSIONS: a key and a certificate issued by the CA.
cert() {
	[ -e "$1.crt" ] && return
	quietly openssl req "${ec[@]}" -subj "/CN=$2" -keyout "$1.key" -out "$1.csr"
	quietly openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 \
		-extfile <(printf '%s\n' "$3") -out "$1.crt"
	rm "$1.csr"
}

for id in a b c; do
	# Each end of a member link presents one: server and client.
	cert "lockserver-$id" "$id.lock.internal" "subjectAltName=DNS:$id.lock.internal,DNS:lockserver-$id,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
done
cert client app "extendedKeyUsage=clientAuth"

if [ ! -e lockserver.env ]; then
	printf 'LOCKSERVER_CLUSTER_SECRET=%s\nLOCKSERVER_PASSWORD=%s\n' "$(openssl rand -hex 32)" "$(openssl rand -hex 16)" >lockserver.env
fi

# The containers run as uid 65532, not as you: the files they mount must be
# readable by it. DIR itself stays yours alone.
chmod 0644 ca.crt lockserver-?.crt lockserver-?.key
echo "gen-certs.sh: wrote $dir"
