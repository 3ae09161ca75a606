#!/bin/sh
# Creates the eviction webhook's serving certificate and wires it in (docs/node-maintenance.md):
#   1. a CA and a certificate for the Service rethinkdb-manager.NAMESPACE.svc, signed by it (openssl);
#   2. the Secret rethinkdb-manager-webhook-tls (type kubernetes.io/tls) the manager mounts, with the CA as ca.crt
#      (a follower replica checks the leader's certificate with it when it passes an eviction review on);
#   3. the CA as caBundle of the ValidatingWebhookConfiguration rethinkdb-manager-eviction.
# Run it after `kubectl apply -k deploy/k8s/` (the webhook configuration must exist), and again before the
# certificate expires (DAYS, 365 by default); the manager reloads the files within a minute and the Secret update
# reaches the pod within the kubelet's sync period. With cert-manager, use a Certificate and the CA injector instead.
# Needs openssl and kubectl (with the right context). NAMESPACE defaults to rethinkdb.
set -eu

NAMESPACE="${NAMESPACE:-rethinkdb}"
DAYS="${DAYS:-365}"
SERVICE=rethinkdb-manager
SECRET=rethinkdb-manager-webhook-tls
WEBHOOK=rethinkdb-manager-eviction

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/ca.key" -out "$dir/ca.crt" -days "$DAYS" \
  -subj "/CN=rethinkdb-manager-webhook-ca" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$dir/tls.key" -out "$dir/tls.csr" \
  -subj "/CN=$SERVICE.$NAMESPACE.svc" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
  "$SERVICE" "$SERVICE" "$NAMESPACE" "$SERVICE" "$NAMESPACE" "$SERVICE" "$NAMESPACE" > "$dir/ext.cnf"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -out "$dir/tls.crt" -days "$DAYS" -extfile "$dir/ext.cnf" 2>/dev/null

kubectl -n "$NAMESPACE" create secret generic "$SECRET" --type=kubernetes.io/tls \
  --from-file=tls.crt="$dir/tls.crt" --from-file=tls.key="$dir/tls.key" --from-file=ca.crt="$dir/ca.crt" \
  --dry-run=client -o yaml | kubectl apply -f -
ca_bundle="$(base64 < "$dir/ca.crt" | tr -d '\n')"
kubectl patch validatingwebhookconfiguration "$WEBHOOK" --type=json \
  -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$ca_bundle\"}]"
echo "webhook certificate for $SERVICE.$NAMESPACE.svc installed (valid $DAYS days); the manager picks it up within a minute"
